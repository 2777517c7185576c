"""The floor under a 10k save and recall over stdio: the SDK's server and Lore's model, nothing else.

``benchmarks/paired.py --floor`` serves this beside the two versions it compares, in the same
turns. Its ``save_lesson`` takes ``save_lesson``'s arguments and embeds what Lore embeds for a
lesson (``embedding_text``); its ``recall_lessons`` embeds the query; both through Lore's own
``Embedder`` on a worker thread, as Lore does, and return a small result. No store, no checks,
no ranking: whatever version of Lore runs beside it, a save or recall cannot take less than this
with the shipped model, so a target below it needs a faster model, not faster code.
"""

from __future__ import annotations

import anyio.to_thread
from mcp.server.mcpserver import MCPServer

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import embedding_text

server = MCPServer(name="model-floor")
embedder = Embedder()


@server.tool()
async def save_lesson(
    problem: str,
    resolution: str,
    context: str | None = None,
    tags: list[str] | None = None,
    confidence: float = 0.5,
    source: str | None = None,
) -> dict[str, int]:
    """Embed the lesson's text as Lore does, store nothing."""
    [vector] = await embedder.aencode_documents([embedding_text(problem, resolution)])
    return {"dimension": len(vector)}


@server.tool()
async def recall_lessons(query: str) -> dict[str, int]:
    """Embed the query as Lore does, search nothing."""
    vector = await anyio.to_thread.run_sync(embedder.encode_query, query)
    return {"dimension": len(vector)}


if __name__ == "__main__":
    embedder.start()
    server.run()
