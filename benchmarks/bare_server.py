"""The baseline for cold start: a bare ``MCPServer`` with one trivial tool over stdio.

``benchmarks/run.py`` spawns this beside ``lore-memory mcp`` and times both from
spawn to the ``initialize`` reply, so Lore's own start-up cost is the difference.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="bare")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


if __name__ == "__main__":
    server.run()
