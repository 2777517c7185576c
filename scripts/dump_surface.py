"""Dump what a user sees of Lore as text, to compare before and after a refactor.

Written for issue 36 ("listings, help texts and error sentences byte-identical"): the tool,
resource, template and prompt listings of a server with every tool group, in both protocol
eras; every ``lore-memory`` help text; and the string constants that raise statements and
error constructors hold in ``lore_mcp`` and ``stores`` (a moved sentence still matches).

    python scripts/dump_surface.py > before.txt   # ... refactor ...
    python scripts/dump_surface.py > after.txt && diff before.txt after.txt
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _help_texts(parser: argparse.ArgumentParser, path: str = "lore-memory") -> list[str]:
    os.environ["COLUMNS"] = "100"
    out = [f"## {path}\n{parser.format_help()}"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                out += _help_texts(sub, f"{path} {name}")
    return out


def _error_strings() -> list[str]:
    found: set[str] = set()
    for root in ("lore_mcp", "stores"):
        for path in sorted((ROOT / root).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    for inner in ast.walk(node.exc):
                        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                            found.add(inner.value)
    return sorted(found)


async def _listings() -> list[str]:
    from mcp import Client

    from lore_mcp.app import App
    from lore_mcp.settings import TOOL_GROUP_NAMES, Settings
    from stores import open_local_store

    out: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LORE_TOOLS"] = ",".join(TOOL_GROUP_NAMES)
        settings = Settings(db_path=Path(tmp) / "lore.db")  # type: ignore[call-arg]
        store = open_local_store(Path(tmp) / "lore.db")
        app = App(settings, store)
        server = app.server(with_keys=True)
        for mode in ("legacy", "2026-07-28"):
            async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
                tools = await client.list_tools()
                out.append(
                    f"## tools ({mode})\n"
                    + json.dumps(tools.model_dump(mode="json"), indent=1, sort_keys=True)
                )
                for name, call in (
                    ("resources", client.list_resources),
                    ("templates", client.list_resource_templates),
                    ("prompts", client.list_prompts),
                ):
                    listed = await call()
                    out.append(
                        f"## {name} ({mode})\n"
                        + json.dumps(listed.model_dump(mode="json"), indent=1, sort_keys=True)
                    )
        store.close()
    return out


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from lore_mcp.cli.main import build_parser

    parts = _help_texts(build_parser())
    parts += asyncio.run(_listings())
    parts.append("## error strings\n" + "\n".join(_error_strings()))
    sys.stdout.write("\n\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
