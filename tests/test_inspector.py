"""The MCP Inspector's CLI (``npx @modelcontextprotocol/inspector --cli``) as a client of Lore:
over stdio, and over HTTP with an API key. Like the conformance suite, a missing ``npx`` or
no registry on the first run is a failure, not a skip (see tests/test_conformance.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.node import node_env, npx
from tests.support.processes import lore_command, lore_env, lore_http

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


def inspector(tmp_path: Path, *args: str, ok: bool = True) -> Any:
    """Run ``mcp-inspector --cli`` with ``args``; returns the ``result`` it prints as JSON
    (or, with ``ok=False``, the finished process, which must have failed)."""
    env = node_env()
    # The Inspector's own files (catalog, client config, OAuth state) stay in the test's directory.
    env.update(
        MCP_CATALOG_PATH=str(tmp_path / "inspector" / "catalog.json"),
        MCP_CLIENT_CONFIG_PATH=str(tmp_path / "inspector" / "client.json"),
        MCP_STORAGE_DIR=str(tmp_path / "inspector" / "storage"),
        MCP_INSPECTOR_OAUTH_STATE_PATH=str(tmp_path / "inspector" / "oauth.json"),
    )
    command = [*npx(INSPECTOR), "mcp-inspector", "--cli", "--format", "json", "--quiet", "--stored-auth-only"]
    run = subprocess.run(
        [*command, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    if not ok:
        assert run.returncode != 0, run.stdout
        return run
    assert run.returncode == 0, (
        f"mcp-inspector exited {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    )
    return json.loads(run.stdout)["result"]


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


def test_inspector_over_stdio(tmp_path: Path) -> None:
    env = lore_env(tmp_path / "lore.db")
    passed = [arg for name in ("LORE_DB_PATH", "HF_HUB_OFFLINE") for arg in ("-e", f"{name}={env[name]}")]
    check_session(tmp_path, [*passed, "--", *lore_command("mcp")])


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
