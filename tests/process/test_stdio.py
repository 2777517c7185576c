"""End to end over a real ``lore-memory mcp`` subprocess speaking stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.processes import RawServer, server_env, stdio_params


@pytest.fixture
def raw_server(tmp_path: Path):
    server = RawServer(server_env(tmp_path / "lore.db"))
    yield server
    server.close()


async def test_a_real_stdio_server_saves_recalls_and_votes(tmp_path: Path) -> None:
    async with connected(stdio_params(tmp_path / "lore.db", LORE_PROJECT="proj-x")) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"save_lesson", "recall_lessons", "upvote_lesson"} <= tools
        saved = await call(
            client,
            "save_lesson",
            problem="pip install fails building psycopg2 on Alpine",
            resolution="Install psycopg[binary] instead, or add postgresql-dev and gcc to the image",
            tags=["python", "docker"],
        )
        got = await call(
            client, "recall_lessons", query="cannot compile the postgres driver in a slim container"
        )
        assert got["lessons"][0]["id"] == saved["id"]
        assert (await call(client, "upvote_lesson", id=saved["id"]))["upvotes"] == 1
    # A new process on the same file sees the lesson.
    async with connected(stdio_params(tmp_path / "lore.db")) as client:
        lesson = await call(client, "get_lesson", id=saved["id"], project="proj-x")
        assert lesson["upvotes"] == 1 and lesson["project"] == "proj-x"
        assert (await call(client, "list_lessons"))["lessons"] == []  # LORE_PROJECT unset: "default"


def test_malformed_frames_get_json_rpc_error_replies_and_serving_continues(raw_server: RawServer) -> None:
    assert "result" in raw_server.initialize()

    raw_server.send("this is not json")
    reply = raw_server.reply()
    assert reply["id"] is None and reply["error"]["code"] == -32700

    deep = (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall_lessons","arguments":{"query":'
        + ("[" * 600 + "]" * 600 + "}}}")
    )
    raw_server.send(deep)
    reply = raw_server.reply()
    assert reply["id"] == 7 and reply["error"]["code"] == -32700

    nested_first = "[" * 5000 + "]" * 5000
    raw_server.send(nested_first)
    reply = raw_server.reply()
    assert reply["id"] is None and reply["error"]["code"] == -32700

    surrogate = (
        '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"save_lesson",'
        '"arguments":{"problem":"bad \\ud800 text","resolution":"x"}}}'
    )
    raw_server.send(surrogate)
    reply = raw_server.reply()
    assert reply["id"] == 8 and reply["error"]["code"] == -32700

    raw_server.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}} \xff\xfe')
    reply = raw_server.reply()
    assert reply["id"] == 9

    raw_server.send("[]")
    reply = raw_server.reply()
    assert reply["id"] is None and reply["error"]["code"] == -32600

    raw_server.send('{"jsonrpc":"2.0","id":"abc"}')
    reply = raw_server.reply()
    assert reply["id"] == "abc" and reply["error"]["code"] == -32600

    raw_server.request(10, "tools/list")
    reply = raw_server.reply()
    assert reply["id"] == 10 and "save_lesson" in {t["name"] for t in reply["result"]["tools"]}


def test_initialize_and_tools_list_do_not_wait_for_the_model(tmp_path: Path) -> None:
    # A model that can never load: the handshake and the tool list must not depend on it.
    server = RawServer(server_env(tmp_path / "lore.db", LORE_EMBEDDING_MODEL=str(tmp_path / "no-such-model")))
    try:
        init = server.initialize()
        assert init["result"]["serverInfo"]["name"] == "lore"
        server.request(1, "tools/list")
        assert "recall_lessons" in {t["name"] for t in server.reply()["result"]["tools"]}
        server.request(
            2, "tools/call", {"name": "save_lesson", "arguments": {"problem": "a", "resolution": "b"}}
        )
        result = server.reply()["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("UNAVAILABLE: ")
        assert "no-such-model" in result["content"][0]["text"]
    finally:
        server.close()


def test_serving_does_not_import_the_model_libraries_up_front() -> None:
    code = (
        "import sys, lore_mcp.cli.main, lore_mcp.transport.server, lore_mcp.transport.stdio, stores.sqlite.lessons; "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_stdio_server_is_built_before_numpy_the_store_and_the_services_load(tmp_path: Path) -> None:
    """Issue 36: ``initialize`` is answered before the store opens (after the first answer, on a
    worker thread), so building the server imports none of what opening and serving need."""
    code = (
        "import sys; from lore_mcp.cli import serve; from lore_mcp.app import App; "
        "from lore_mcp.settings import Settings; "
        "App(Settings(db_path=sys.argv[1])).server(with_keys=False); "
        "loaded = ('numpy', 'onnxruntime', 'stores.engine.lesson_rules', 'lore_mcp.services.lessons'); "
        "print([m for m in loaded if m in sys.modules])"
    )
    db = tmp_path / "lore.db"
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert not db.exists()  # nothing opened yet


async def test_a_tool_error_over_stdio_carries_its_code(tmp_path: Path) -> None:
    async with Client(stdio_params(tmp_path / "lore.db")) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "recall_lessons", query="x", limit=500)
        assert err.value.code == "VALIDATION_ERROR"


PIPED = "\n".join(
    json.dumps(m)
    for m in (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    )
)


@pytest.mark.parametrize("run", range(6))
def test_input_closed_at_once_is_answered_in_full_and_the_process_exits_cleanly(
    tmp_path: Path, run: int
) -> None:
    """Issue 34, item 8: requests piped in and stdin closed while the model still loads (the
    MCP Inspector CLI does this). Each request is answered before the server stops, and the exit
    waits for the model's loader thread: one still inside ONNX Runtime aborted the process
    (SIGABRT, "terminate called without an active exception"). A race, so run several times."""
    done = subprocess.run(
        [sys.executable, "-m", "lore_mcp", "mcp"],
        input=PIPED + "\n",
        env=server_env(tmp_path / "lore.db"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(replies) == [1, 2]
    assert "recall_lessons" in {t["name"] for t in replies[2]["result"]["tools"]}
    assert "terminate called" not in done.stderr
