"""Lore's public surface: the MCP server, its transports and the CLI.

This layer turns MCP calls into calls on the ``stores`` protocols. It owns
redaction, embedding and error mapping, and writes no SQL."""

__version__ = "0.1.0"
