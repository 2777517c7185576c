"""Every client configuration in the docs works as written, and the OpenClaw skill is accurate.

Each JSON snippet of the README, of every page under docs/ and of the example file is parsed,
and the server each entry names is started and spoken to: `uvx [--from <clone>]
lore-memory-mcp …` runs this checkout's `lore-memory` with the same arguments and environment;
a `url` entry is connected to a real team server with the headers it gives (its placeholder key
replaced by a real one).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.tools.registry import TOOL_GROUPS
from tests.support.clients import connected
from tests.support.team import http_client, team_server

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
# Where users copy configurations from: the README, then every page of the documentation site.
PAGES = [("README", README)] + [
    (str(page.relative_to(ROOT)), page.read_text()) for page in sorted(DOCS.rglob("*.md"))
]
ALL_TOOLS = {name for names in TOOL_GROUPS.values() for name in names}


def config_entries() -> list[tuple[str, dict[str, Any]]]:
    sources = [
        (where, json.loads(b))
        for where, text in PAGES
        for b in re.findall(r"```json\n(.*?)```", text, re.DOTALL)
    ]
    sources.append(("example", json.loads((ROOT / "claude_desktop_config.example.json").read_text())))
    entries = []
    for i, (where, config) in enumerate(sources):
        servers = config.get("mcpServers") or config.get("context_servers")
        if servers is None:
            continue  # a tool result or plan shown in the docs, not a configuration
        entries += [(f"{where}-{i}:{name}", entry) for name, entry in servers.items()]
    return entries


ENTRIES = config_entries()


# The distribution on the package index and its console scripts. `lore-memory` on PyPI is an
# unrelated project: uvx would install and run its code for a command of that name.
OURS = "lore-memory-mcp"
COMMANDS = {"lore-memory", "lore-memory-mcp"}
# uvx options that take a value (the rest are flags).
VALUED = {
    "--from",
    "--with",
    "--with-editable",
    "--with-requirements",
    "--python",
    "-p",
    "--index",
    "--default-index",
    "--index-url",
    "-i",
    "--extra-index-url",
    "--find-links",
    "-f",
    "--constraints",
    "-c",
    "--overrides",
    "--env-file",
    "--cache-dir",
    "--directory",
    "--project",
}


def uvx_command_index(args: list[str]) -> tuple[int, str | None]:
    """Where the command stands in ``uvx ARGS`` (after uvx's own options), and ``--from``'s value."""
    source, i = None, 0
    while i < len(args) and args[i].startswith("-"):
        option, _, inline = args[i].partition("=")
        if option in VALUED and not inline:
            i += 1
            inline = args[i] if i < len(args) else ""
        if option == "--from":
            source = inline
        i += 1
    return i, source


def uvx_distribution(args: list[str]) -> tuple[str, str]:
    """(distribution, command) that ``uvx ARGS`` runs: ``--from``'s requirement, else the command's
    own name (uvx installs the package named like the command), without extras or version."""
    i, source = uvx_command_index(args)
    command = args[i] if i < len(args) else ""
    requirement = source or command
    if requirement.startswith(("/", ".", "<")) or requirement.endswith(".whl"):
        return OURS, command.split("@")[0]  # a local wheel or checkout (`<wheel>` in prose)
    name = re.split(r"[\[@=<>~! ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower(), command.split("@")[0]


def shown_as_code(path: str, text: str) -> str:
    """The parts of a file a user would copy as a command: code spans and blocks of Markdown,
    ``literals`` and, in the packages, the quoted strings Lore prints; recipe lines of the
    Makefile; all of a Dockerfile or compose file. Prose may say "uvx" in passing."""
    if path.endswith(".md"):
        return "\n".join(re.findall(r"```.*?```|`[^`\n]+`", text, re.DOTALL))
    if path.endswith(".py"):
        spans = re.findall(r"``[^`\n]+``", text)
        if path.startswith(("lore_mcp/", "stores/")):
            spans += re.findall(r"\"[^\"\n]*\"", text)
        return "\n".join(spans)
    if path.endswith("Makefile"):
        return "\n".join(line for line in text.splitlines() if line.startswith("\t"))
    return text


def uvx_snippets() -> list[tuple[str, list[str]]]:
    """Every uvx invocation a user could copy from this repository: the configs' entries, and
    ``uvx …`` shown as code in every tracked file but the tests' own (``shown_as_code``)."""
    found = [(name, list(e["args"])) for name, e in ENTRIES if e.get("command") == "uvx"]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    for path in tracked.stdout.splitlines():
        if path.startswith("tests/") or not path.endswith(
            (".md", ".json", ".yml", ".yaml", ".toml", ".py", "Dockerfile", "Makefile")
        ):
            continue
        text = (ROOT / path).read_text(errors="replace")
        if path.endswith(".json"):  # configs; benchmarks' records have no mcpServers
            for config in [json.loads(text)] if '"mcpServers"' in text else []:
                found += [
                    (path, e["args"]) for e in config["mcpServers"].values() if e.get("command") == "uvx"
                ]
            continue
        for match in re.finditer(r"\buvx((?:[ \t]+[^\s`\"),;|&]+)+)", shown_as_code(path, text)):
            found.append((f"{path}: {match.group(0)}", shlex.split(match.group(1).replace("'", ""))))
    return found


def test_every_uvx_in_the_repo_runs_lore_not_a_namesake() -> None:
    snippets = uvx_snippets()
    assert len(snippets) >= 5  # the docs' clients, the example's two entries, and more
    wrong = [
        f"{where} runs {dist!r} ({command!r})"
        for where, args in snippets
        for dist, command in [uvx_distribution(args)]
        if dist != OURS or command not in COMMANDS
    ]
    assert not wrong, "uvx invocations that would run another distribution than Lore:\n" + "\n".join(wrong)


def test_the_uvx_check_tells_lore_from_its_namesakes() -> None:
    assert uvx_distribution(["lore-memory-mcp", "mcp"]) == (OURS, "lore-memory-mcp")
    assert uvx_distribution(["--from", "lore-memory-mcp[postgres]", "lore-memory", "mcp"]) == (
        OURS,
        "lore-memory",
    )
    assert uvx_distribution(["--from", "/tmp/dist/x.whl", "lore-memory", "mcp"])[0] == OURS
    assert uvx_distribution(["lore-memory", "mcp"])[0] == "lore-memory"  # the unrelated project
    assert uvx_distribution(["--python", "3.12", "lore-mcp", "mcp"])[0] == "lore-mcp"


def test_the_docs_have_every_kind_of_configuration() -> None:
    kinds = {("url" if "url" in e else e.get("env", {}).get("LORE_STORE", "local")) for _, e in ENTRIES}
    assert kinds == {"local", "remote", "url"}
    assert any(name.startswith("example") and e["env"].get("LORE_STORE") == "remote" for name, e in ENTRIES)
    assert "context_servers" in (DOCS / "clients" / "zed.md").read_text()
    assert ".cursor/mcp.json" in (DOCS / "clients" / "cursor.md").read_text()


def stdio_command(entry: dict[str, Any], tmp_path: Path) -> StdioServerParameters:
    command, args = entry["command"], list(entry["args"])
    if command == "uvx":  # `uvx [--from <clone>] lore-memory-mcp ARGS`: this checkout's ARGS
        i, _ = uvx_command_index(args)
        assert uvx_distribution(args) == (OURS, args[i]) and args[i] in COMMANDS
        args = args[i + 1 :]
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
    skill = (ROOT / "plugins" / "lore" / "skills" / "lore" / "SKILL.md").read_text()
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
