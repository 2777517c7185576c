"""End to end over a real ``lore-memory mcp`` subprocess speaking stdio."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import connected
from tests.helpers import ToolFailed, call

READ_TIMEOUT = 60


def server_env(db_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update({"LORE_DB_PATH": str(db_path), "HF_HUB_OFFLINE": "1", **extra})
    return env


def stdio_params(db_path: Path, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "lore_mcp", "mcp"], env=server_env(db_path, **extra)
    )


class RawServer:
    """A server process driven line by line, to send frames no well-behaved client would."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lore_mcp", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, raw: str | bytes) -> None:
        assert self.proc.stdin is not None
        data = raw.encode() if isinstance(raw, str) else raw
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def request(self, msg_id: int, method: str, params: dict[str, Any] | None = None) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}))

    def reply(self) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=READ_TIMEOUT))
        except queue.Empty:
            pytest.fail("the server sent no reply")

    def initialize(self) -> dict[str, Any]:
        self.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        result = self.reply()
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._pump_thread.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


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
        "import sys, lore_mcp.cli, lore_mcp.server, lore_mcp.stdio, stores.local_lessons; "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_tool_error_over_stdio_carries_its_code(tmp_path: Path) -> None:
    async with Client(stdio_params(tmp_path / "lore.db")) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "recall_lessons", query="x", limit=500)
        assert err.value.code == "VALIDATION_ERROR"
