"""Hearth: an offline assistant for your own computer."""

__version__ = "0.1.0"
