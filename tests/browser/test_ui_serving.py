"""How the page for people is served, without a browser: its headers (a CSP without inline
script or eval), the fixed set of files, the Host check, that every file ships in the wheel,
and ``lore-memory ui`` as a person runs it: it prints the page's URL with a one-time key that
works, and Ctrl-C stops it and revokes the key."""

from __future__ import annotations

import fnmatch
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.transport.ui.routes import static_files
from stores import open_local_store
from tests.support.processes import server_env
from tests.support.team import TeamServer, team_server

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "lore_mcp" / "transport" / "ui" / "static"
MODERN = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/list",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def lore(tmp_path: Path, embedder: Embedder) -> Iterator[TeamServer]:
    store = open_local_store(tmp_path / "lore.db")
    try:
        with team_server(store, embedder) as server:
            yield server
    finally:
        store.close()


def test_the_page_is_served_with_a_policy_that_allows_no_inline_script(lore: TeamServer) -> None:
    moved = httpx2.get(f"{lore.base}/ui", timeout=30)
    assert moved.status_code == 307 and moved.headers["location"] == "/ui/"
    page = httpx2.get(f"{lore.base}/ui/", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    # Nothing inline for the policy to forbid: every script has a src, no element an on… handler.
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text) is None
    assert re.search(r"\son[a-z]+\s*=", page.text) is None
    for script in re.findall(r'src="([^"]+)"', page.text):
        loaded = httpx2.get(f"{lore.base}/ui/{script}", timeout=30)
        assert loaded.status_code == 200 and loaded.headers["content-type"].startswith("text/javascript")
        assert loaded.headers["content-security-policy"] == policy


def test_only_the_pages_own_files_are_served(lore: TeamServer) -> None:
    for path in ("/ui/nope.js", "/ui/../pyproject.toml", "/ui/js/../../routes.py", "/ui/%2e%2e/routes.py"):
        assert httpx2.get(f"{lore.base}{path}", timeout=30).status_code == 404, path
    # The same DNS-rebinding check as /mcp: a page under another host name is refused.
    refused = httpx2.get(f"{lore.base}/ui/", headers={"Host": "evil.example"}, timeout=30)
    assert refused.status_code in (400, 421)


def test_every_file_of_the_page_ships_in_the_wheel() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "lore_mcp"
    ]
    files = sorted(static_files())
    assert {"index.html", "style.css", "js/app.js", "js/mcp.js"} <= set(files)
    on_disk = sorted(
        str(p.relative_to(STATIC)) for p in STATIC.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert files == on_disk, "every file under static/ is served"
    for name in files:
        path = f"transport/ui/static/{name}"
        assert any(
            fnmatch.fnmatch(path, pattern) and path.count("/") == pattern.count("/") for pattern in patterns
        ), f"{path} is not in [tool.setuptools.package-data]"


def test_the_pages_scripts_never_parse_text_as_html_or_code() -> None:
    """Stored text reaches the page only as text nodes (``dom.js``): no script of the page uses
    a sink that would parse it as markup or run it as code."""
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\"on"
    )
    scripts = sorted(STATIC.rglob("*.js"))
    assert len(scripts) >= 5
    for script in scripts:
        found = sinks.search(script.read_text())
        assert found is None, f"{script.name} uses {found.group(0) if found else ''}"


def _page_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/ui/#key=lore_sk_[A-Za-z0-9]{32})", line)
        if found:
            return found.group(1)
        assert line or process.poll() is None, "lore-memory ui exited before printing the page's URL"
    pytest.fail("lore-memory ui printed no URL in 90 s")


def _tools(base: str, key: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    return httpx2.post(
        f"{base}/mcp", json=body, headers={**MODERN, "Authorization": f"Bearer {key}"}, timeout=30
    )


def test_lore_memory_ui_prints_a_working_url_and_ctrl_c_revokes_its_key(tmp_path: Path) -> None:
    db = tmp_path / "lore.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "lore_mcp", "ui", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # The agents of this machine get only lessons; the page still gets every view's tools.
        env=server_env(db, LORE_TOOLS="lessons"),
    )
    try:
        url = _page_url(process)
        base, key = url.split("/ui/#key=")
        assert httpx2.get(f"{base}/ui/", timeout=30).status_code == 200
        listed = _tools(base, key)
        assert listed.status_code == 200, listed.text
        assert {"recall_lessons", "history", "query_rows"} <= {
            tool["name"] for tool in listed.json()["result"]["tools"]
        }
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert "key is revoked" in stderr
    store = open_local_store(db)
    try:
        keys = store.keys.list_keys("local")
    finally:
        store.close()
    assert [k.name for k in keys] == ["ui"] and keys[0].revoked_at is not None, (
        "the one-time key outlives no run"
    )


def test_lore_memory_ui_says_why_it_cannot_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [sys.executable, "-m", "lore_mcp", "ui", "--no-browser", "--port", str(port)],
            capture_output=True,
            text=True,
            env=server_env(tmp_path / "lore.db"),
            timeout=120,
        )
    assert busy.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    remote = subprocess.run(
        [sys.executable, "-m", "lore_mcp", "ui", "--no-browser"],
        capture_output=True,
        text=True,
        env=server_env(tmp_path / "lore.db", LORE_STORE="remote"),
        timeout=120,
    )
    assert remote.returncode == 2 and "open the team server's /ui" in remote.stderr
    assert not (tmp_path / "lore.db").exists(), "neither opened the store"
