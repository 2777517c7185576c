"""JSON nested past Python's recursion limit from an untrusted client (issue 34, item 7).

A 2 KB body of depth 1,000 made the team server's body guard raise ``RecursionError``: a
plain-text 500 and a traceback at ERROR. Stdio answered -32700; HTTP must too, with one
sentence and one log line; a file to import nested as deeply is a bad line, not a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx2
import pytest

from lore_mcp.cli.importers import lesson_lines
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.transfer import _checked_lines
from tests.support.team import ACCEPT, team_server

pytestmark = pytest.mark.era("2026-07-28", reason="a malformed body is refused before any era-specific code")

DEEP = "[" * 1000 + "]" * 1000  # 2 KB, depth 1,000


@pytest.mark.parametrize(
    "body",
    [
        DEEP,
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "list_lessons", "arguments": '
        + DEEP
        + "}}",
    ],
    ids=["bare", "inside-a-call"],
)
def test_a_deeply_nested_body_gets_a_json_rpc_parse_error_and_one_log_line(
    body: str, store: Any, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    with team_server(store, embedder) as server:
        key = server.keys.init_org("acme").key
        with caplog.at_level(logging.INFO):
            answer = httpx2.post(
                server.url,
                content=body.encode(),
                headers={
                    "Accept": ACCEPT,
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {key}",
                },
                timeout=30,
            )
        assert httpx2.get(f"{server.base}/healthz", timeout=10).status_code == 200
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] in (-32700, -32600)
    assert error["message"].count(". ") == 0 and "Traceback" not in answer.text
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("source", ["server-memory", "mcp-memory-service"])
def test_a_file_to_import_nested_too_deeply_is_refused_naming_the_line(source: str) -> None:
    """``lore-memory import`` reads files from elsewhere: a line nested too deeply is a bad line."""
    assert _checked_lines([(2, DEEP)]) == [(2, "not JSON (nested too deeply)")]
    with pytest.raises(ValueError, match=r"line 1: not JSON \(nested too deeply\)"):
        lesson_lines(source, DEEP)
