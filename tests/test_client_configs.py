"""Every client configuration in the docs works as written, and the OpenClaw skill is accurate.

Each JSON snippet of the README and the example file is parsed, and the server each entry
names is started and spoken to: `uvx lore-memory …` runs this checkout's `lore-memory`
with the same arguments and environment; a `url` entry is connected to a real team server
with the headers it gives (its placeholder key replaced by a real one).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from lore_mcp.embedding import Embedder
from lore_mcp.tools.registry import TOOL_GROUPS
from tests.support.clients import connected
from tests.support.team import http_client, team_server

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
ALL_TOOLS = {name for names in TOOL_GROUPS.values() for name in names}


def config_entries() -> list[tuple[str, dict[str, Any]]]:
    sources = [("README", json.loads(b)) for b in re.findall(r"```json\n(.*?)```", README, re.DOTALL)]
    sources.append(("example", json.loads((ROOT / "claude_desktop_config.example.json").read_text())))
    entries = []
    for i, (where, config) in enumerate(sources):
        servers = config.get("mcpServers") or config.get("context_servers")
        if servers is None:
            continue  # a tool result or plan shown in the README, not a configuration
        entries += [(f"{where}-{i}:{name}", entry) for name, entry in servers.items()]
    return entries


ENTRIES = config_entries()


def test_the_docs_have_every_kind_of_configuration() -> None:
    kinds = {("url" if "url" in e else e.get("env", {}).get("LORE_STORE", "local")) for _, e in ENTRIES}
    assert kinds == {"local", "remote", "url"}
    assert any(name.startswith("example") and e["env"].get("LORE_STORE") == "remote" for name, e in ENTRIES)
    assert "context_servers" in README and ".cursor/mcp.json" in README


def stdio_command(entry: dict[str, Any], tmp_path: Path) -> StdioServerParameters:
    command, args = entry["command"], list(entry["args"])
    if command == "uvx":
        assert args[0] == "lore-memory"
        args = args[1:]
    else:
        assert command.endswith("/lore-memory")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(entry.get("env", {}))
    env.setdefault("LORE_DB_PATH", str(tmp_path / "lore.db"))
    return StdioServerParameters(command=sys.executable, args=["-m", "lore_mcp", *args], env=env)


@pytest.mark.parametrize("name", [n for n, e in ENTRIES if "command" in e])
async def test_each_stdio_configuration_starts_a_lore_server(name: str, tmp_path: Path) -> None:
    entry = dict(ENTRIES)[name]
    async with connected(stdio_command(entry, tmp_path)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"save_lesson", "recall_lessons"} <= names
        if entry.get("env", {}).get("LORE_STORE") != "remote":
            result = await client.call_tool("save_lesson", {"problem": "config check", "resolution": "works"})
            assert not result.is_error


@pytest.mark.parametrize("name", [n for n, e in ENTRIES if "url" in e])
async def test_each_http_configuration_reaches_a_team_server(
    name: str, store: Any, embedder: Embedder, backend: str
) -> None:
    if backend != "local":
        pytest.skip("one backend is enough for a configuration check")
    entry = dict(ENTRIES)[name]
    assert entry["url"].endswith("/mcp")
    with team_server(store, embedder) as server:
        key = server.keys.init_org("local").key
        header = entry["headers"]["Authorization"].replace("lore_sk_...", key)
        async with http_client(server.url, header.removeprefix("Bearer ")) as client:
            assert "save_lesson" in {t.name for t in (await client.list_tools()).tools}


def test_the_openclaw_skill_names_only_real_tools() -> None:
    skill = (ROOT / "skills" / "lore" / "SKILL.md").read_text()
    front = re.match(r"^---\n(.*?)\n---\n", skill, re.DOTALL)
    assert front, "SKILL.md needs YAML frontmatter"
    fields = dict(line.split(": ", 1) for line in front.group(1).splitlines())
    assert fields["name"] == "lore" and len(fields["description"]) > 40
    json.loads(fields["metadata"])
    mentioned = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", skill))
    tools = {m for m in mentioned if m in ALL_TOOLS}
    assert {
        "recall_lessons",
        "save_lesson",
        "upvote_lesson",
        "downvote_lesson",
        "schema",
        "plan",
        "apply",
    } <= tools | {m for m in re.findall(r"`([a-z]+)`", skill) if m in ALL_TOOLS}
    not_tools = mentioned - ALL_TOOLS - {"create_table", "add_column", "schema_hash"}
    assert not not_tools, f"SKILL.md names tools Lore does not have: {sorted(not_tools)}"
    assert len(skill.splitlines()) < 120  # short: it is read into an agent's context
