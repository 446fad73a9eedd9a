"""The command line: the parser and dispatch (``main``) and what each command does (one module a command group)."""
