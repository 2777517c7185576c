"""The MCP Inspector's CLI (``npx @modelcontextprotocol/inspector --cli``) as a client of Lore:
over stdio, and over HTTP with an API key. Like the conformance suite, a missing ``npx`` or
no registry on the first run is a failure, not a skip (see tests/process/test_conformance.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from lore_mcp.tools.registry import TOOL_GROUPS, TOOLS
from tests.support.node import node_env, npx
from tests.support.processes import lore_command, lore_env, lore_http

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


def inspector(tmp_path: Path, *args: str, ok: bool = True) -> Any:
    """Run ``mcp-inspector --cli`` with ``args``; returns the ``result`` it prints as JSON
    (or, with ``ok=False``, the finished process, which must have failed)."""
    if not ok:
        run = run_inspector(tmp_path, *args)
        assert run.returncode != 0, run.stdout
        return run
    return inspector_envelope(tmp_path, *args)["result"]


def inspector_envelope(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run ``mcp-inspector --cli`` with ``args``, which must succeed; returns everything it
    prints as JSON (``result``, and with ``--strict`` any ``schemaFindings``)."""
    run = run_inspector(tmp_path, *args)
    assert run.returncode == 0, (
        f"mcp-inspector exited {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    )
    envelope: dict[str, Any] = json.loads(run.stdout)
    return envelope


def run_inspector(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The finished ``mcp-inspector --cli --format json`` process, run with ``args``."""
    env = node_env()
    # The Inspector's own files (catalog, client config, OAuth state) stay in the test's directory.
    env.update(
        MCP_CATALOG_PATH=str(tmp_path / "inspector" / "catalog.json"),
        MCP_CLIENT_CONFIG_PATH=str(tmp_path / "inspector" / "client.json"),
        MCP_STORAGE_DIR=str(tmp_path / "inspector" / "storage"),
        MCP_INSPECTOR_OAUTH_STATE_PATH=str(tmp_path / "inspector" / "oauth.json"),
    )
    command = [*npx(INSPECTOR), "mcp-inspector", "--cli", "--format", "json", "--quiet", "--stored-auth-only"]
    return subprocess.run(
        [*command, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )


def check_session(tmp_path: Path, target: list[str]) -> None:
    """List the tools, save a lesson, recall it: what an agent does first."""
    listed = inspector(tmp_path, "--method", "tools/list", *target)
    names = {tool["name"] for tool in listed["tools"]}
    assert {"save_lesson", "recall_lessons"} <= names

    saved = inspector(
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "save_lesson",
        "--tool-arg",
        "problem=npm ci fails with EINTEGRITY after switching registries",
        "--tool-arg",
        "resolution=delete package-lock.json and the npm cache, then npm install",
        *target,
    )
    assert saved["isError"] is False
    lesson_id = saved["structuredContent"]["id"]

    recalled = inspector(
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "recall_lessons",
        "--tool-arg",
        "query=npm EINTEGRITY checksum error",
        *target,
    )
    assert recalled["isError"] is False
    assert [lesson["id"] for lesson in recalled["structuredContent"]["lessons"]][:1] == [lesson_id]
    assert lesson_id in json.dumps(recalled["content"])  # the text block says the same


def stdio_target(tmp_path: Path, **settings: str) -> list[str]:
    """Inspector arguments that start ``lore-memory mcp`` over stdio on a fresh database."""
    env = {**lore_env(tmp_path / "lore.db"), **settings}
    names = ("LORE_DB_PATH", "HF_HUB_OFFLINE", *settings)
    return [*(arg for name in names for arg in ("-e", f"{name}={env[name]}")), "--", *lore_command("mcp")]


def test_inspector_over_stdio(tmp_path: Path) -> None:
    check_session(tmp_path, stdio_target(tmp_path))


def test_every_listed_schema_passes_the_inspectors_portability_check(tmp_path: Path) -> None:
    """The Inspector lints the schemas of a ``tools/list`` answer (``--strict`` lists each
    finding): a type list (``type: [T, null]``), a schema that constrains nothing, a remote
    ``$ref`` are schemas some clients (Gemini's OpenAPI subset) refuse or weaken. Every group
    is listed, so every tool's input and output schema is checked."""
    target = stdio_target(tmp_path, LORE_TOOLS=",".join(TOOL_GROUPS))
    listed = inspector_envelope(tmp_path, "--strict", "--method", "tools/list", *target)
    assert [tool["name"] for tool in listed["result"]["tools"]] == [spec.name for spec in TOOLS]
    assert all("outputSchema" in tool for tool in listed["result"]["tools"])
    findings = [
        f"{found['toolName']} {finding['schema']}.{finding['path']}: {finding['rule']} ({finding['severity']})"
        for found in listed.get("schemaFindings", [])
        for finding in found["findings"]
    ]
    assert findings == [], f"{len(findings)} findings:\n" + "\n".join(findings)


def test_inspector_over_http_with_an_api_key(tmp_path: Path) -> None:
    env = lore_env(tmp_path / "lore.db")
    init = subprocess.run(
        lore_command("init", "--json"), env=env, capture_output=True, text=True, timeout=120
    )
    assert init.returncode == 0, init.stderr
    key = json.loads(init.stdout)["key"]
    with lore_http(env, tmp_path / "server.log") as url:
        target = ["--transport", "http", "--server-url", url]
        # --header takes several values: it comes last, so it cannot swallow the URL.
        check_session(tmp_path, [*target, "--header", f"Authorization: Bearer {key}"])
        refused = inspector(tmp_path, "--method", "tools/list", *target, ok=False)
        assert "auth" in (refused.stdout + refused.stderr).lower()
