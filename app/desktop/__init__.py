"""Hearth in its own window: one instance per data folder, the server in a child process the window owns."""
