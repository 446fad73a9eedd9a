"""Tools the assistant may call for the page and the terminal: MCP servers the user adds."""
