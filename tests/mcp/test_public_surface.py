"""Pin the public surface: tools, settings and docs cannot drift apart silently."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mcp import Client

from lore_mcp.cli.main import build_parser
from lore_mcp.errors import CODES
from lore_mcp.settings import Settings
from lore_mcp.tools.registry import ADMIN_TOOLS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
# The reference of every tool, error code and setting; the loop's settings are on their own page.
TOOLS_PAGE = (DOCS / "tools.md").read_text()
SETTINGS_PAGES = TOOLS_PAGE + (DOCS / "agent-loop.md").read_text()
STRUCTURED_PAGE = (DOCS / "structured-memory.md").read_text()
# The README and every page of the documentation site, where users copy configurations from.
ALL_DOCS = "\n".join([README, *(p.read_text() for p in sorted(DOCS.rglob("*.md")))])


async def test_every_tool_is_documented_in_the_tool_reference(client: Client) -> None:
    names = {tool.name for tool in (await client.list_tools()).tools} | ADMIN_TOOLS
    for name in names:
        assert f"`{name}(" in TOOLS_PAGE, f"{name} is missing from the tool reference, docs/tools.md"


def test_every_setting_is_an_env_var_and_a_flag_and_is_documented() -> None:
    flags = build_parser()._subparsers._group_actions[0].choices["mcp"].format_help()  # type: ignore[union-attr]
    for name, field in Settings.model_fields.items():
        assert field.description, f"setting {name} needs a description"
        assert f"`LORE_{name.upper()}`" in SETTINGS_PAGES, (
            f"LORE_{name.upper()} is missing from docs/tools.md"
        )
        assert "--" + name.replace("_", "-") in flags, f"--{name} flag missing from lore-memory mcp"


def test_every_error_code_is_documented() -> None:
    for code in CODES:
        assert f"`{code}`" in TOOLS_PAGE, f"{code} is missing from docs/tools.md"


def test_every_json_snippet_in_the_docs_parses_and_names_lore_memory_mcp() -> None:
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", ALL_DOCS, re.DOTALL)]
    configs = [b for b in blocks if "tool" not in b]
    assert len(configs) >= 4
    configs.append(json.loads((ROOT / "claude_desktop_config.example.json").read_text()))
    for config in configs:
        servers = config.get("mcpServers") or config.get("context_servers")
        entry = servers["lore"]
        if "url" in entry:  # a client speaking streamable HTTP to the team server
            assert entry["url"].endswith("/mcp")
            assert entry["headers"]["Authorization"].startswith("Bearer lore_sk_")
            continue
        assert entry["command"].endswith(("uvx", "lore-memory"))
        assert entry["args"][-1] == "mcp"


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in README
    assert ci in (DOCS / "getting-started.md").read_text()


def test_lore_memory_command_reports_its_version() -> None:
    exe = shutil.which("lore-memory", path=str(Path(sys.executable).parent))
    assert exe, "the lore-memory console script is not installed"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("lore-memory ")


def test_a_backend_that_cannot_start_exits_with_a_clear_message() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    cases = [
        (["mcp", "--store", "remote"], "LORE_STORE=remote needs LORE_API_URL and LORE_API_KEY"),
        (["mcp", "--store", "remote", "--api-url", "ftp://x", "--api-key", "k"], "must be an http(s) URL"),
        (["mcp", "--transport", "http", "--store", "remote"], "a team server serves its own store"),
        (["keys", "list", "--store", "remote"], "LORE_STORE=remote forwards to a team server"),
        (["init", "--org", "no spaces"], "invalid configuration"),
        (["mcp", "--store", "postgres"], "LORE_STORE=postgres needs LORE_DATABASE_URL"),
        (["mcp", "--database-read-url", "postgresql://replica/lore"], "need LORE_STORE=postgres"),
        (["mcp", "--decay-half-life-days", "-3"], "invalid configuration"),
    ]
    for args, message in cases:
        out = subprocess.run(
            [sys.executable, "-m", "lore_mcp", *args], capture_output=True, text=True, env=env
        )
        assert out.returncode != 0, args
        assert message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr


async def test_the_structured_memory_example_in_the_docs_runs_as_written(client: Client) -> None:
    section = STRUCTURED_PAGE[STRUCTURED_PAGE.index("## A worked example") :]
    calls = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.DOTALL) if '"tool"' in b]
    assert [c["tool"] for c in calls] == [
        "schema",
        "plan",
        "apply",
        "apply",
        "query_rows",
        "history",
        "revert_commit",
    ]
    results = []
    for step in calls:
        arguments = step["arguments"]
        if step["tool"] == "revert_commit":
            update_commit = results[-1]["commits"][0]
            assert update_commit["message"] == "Changelog written"
            arguments = {"commit_id": update_commit["id"]}
        result = await client.call_tool(step["tool"], arguments)
        assert not result.is_error, (step["tool"], result.content[0].text)
        results.append(result.structured_content)
    schema, planned, created, updated, open_tasks, history, reverted = results
    assert schema["schema_hash"] in STRUCTURED_PAGE and created["schema_hash"] in STRUCTURED_PAGE
    assert planned["ok"] and planned["risk"] == "low" and planned["effects"]["rows"]["inserted"] == 2
    assert created["seq"] == 1 and updated["seq"] == 2
    assert [row["title"] for row in open_tasks["rows"]] == ["Tag the release"]
    assert [c["seq"] for c in history["commits"]] == [2, 1]
    assert reverted["reverted"] == updated["commit_id"]
    rows = await client.call_tool(
        "query_rows", {"table": "tasks", "where": [{"column": "done", "op": "=", "value": False}]}
    )
    assert len(rows.structured_content["rows"]) == 2
