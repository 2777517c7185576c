"""A real team server for tests: Lore's HTTP app under uvicorn on 127.0.0.1, in a thread.

The app is the one ``lore-memory mcp --transport http`` serves (``lore_mcp.transport.http``),
on a real socket, so clients speak real streamable HTTP to it; running it in
this process lets the tests share the already loaded embedding model.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Collection, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.settings import AuthSettings

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.key_tokens import ApiKeyVerifier
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.admission import HeavyGate
from lore_mcp.transport.http import build_app, server_config
from tests.support.clients import connected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class TeamServer:
    url: str  # the /mcp endpoint
    base: str
    keys: KeyService


class RecordBodies:
    """ASGI middleware keeping every request body, to check what a client sent over the wire."""

    def __init__(self, app: Any, bodies: list[bytes]) -> None:
        self.app = app
        self.bodies = bodies

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def recording_receive() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                self.bodies.append(message.get("body", b""))
            return message

        await self.app(scope, recording_receive, send)


@contextlib.contextmanager
def team_server(
    store: Any,
    embedder: Embedder,
    *,
    rate_limit_per_minute: int = 10_000,
    record: list[bytes] | None = None,
    trusted_proxies: tuple[str, ...] = (),
    heavy_gate: HeavyGate | None = None,
    request_timeout_s: float | None = 30.0,
    tools: Collection[str] | None = None,
    people: Collection[str] = (),
    stateless: bool = False,
) -> Iterator[TeamServer]:
    """Serve ``store`` over HTTP until the block ends (``record`` collects request bodies;
    ``trusted_proxies`` is ``LORE_TRUSTED_PROXIES``; ``heavy_gate`` admits heavy calls, as
    ``App.heavy_gate`` does for the real team server; ``tools`` the groups, the default ones if None;
    ``people`` the ids of keys a person's page holds, as ``lore-memory ui`` names its key;
    ``stateless`` is ``LORE_STATELESS_HTTP``)."""
    port = free_port()
    verifier = ApiKeyVerifier(store.keys)
    verifier.people = frozenset(people)
    service = LessonService(store, embedder, default_project="default")
    server = build_server(
        service,
        keys=KeyService(store.keys),
        token_verifier=verifier,
        auth=AuthSettings(issuer_url=f"http://127.0.0.1:{port}", resource_server_url=None),
        heavy_gate=heavy_gate,
        request_timeout_s=request_timeout_s,
        tools=tools,
    )
    app = build_app(
        server,
        host="127.0.0.1",
        health=lambda: (store.keys.get_org("local"), store.probe_write()),
        store_name="test",
        rate_limit_per_minute=rate_limit_per_minute,
        trusted_proxies=trusted_proxies,
        call_counts=store.call_counts,
        stateless=stateless,
    )
    if record is not None:
        app = RecordBodies(app, record)
    # The team server's own uvicorn configuration, so forwarded headers are handled as it does.
    uv = uvicorn.Server(
        server_config(app, host="127.0.0.1", port=port, log_level="warning", drain_timeout_s=5)
    )
    base = f"http://127.0.0.1:{port}"
    with running(uv):
        yield TeamServer(url=f"{base}/mcp", base=base, keys=KeyService(store.keys))


@contextlib.contextmanager
def running(server: uvicorn.Server) -> Iterator[uvicorn.Server]:
    """``server`` serving on a thread of its own until the block ends, then stopped and joined;
    the block starts once it listens."""
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "a test HTTP server did not start"
        time.sleep(0.02)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextlib.asynccontextmanager
async def http_client(url: str, key: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """An MCP client over streamable HTTP sending ``Authorization: Bearer key`` (``mode`` as
    for ``connected``)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        connected(streamable_http_client(url, http_client=http), mode) as client,
    ):
        yield client


def initialize_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def raw_post(url: str, authorization: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return httpx2.post(url, json=initialize_body(), headers=headers, timeout=30)


ACCEPT = "application/json, text/event-stream"


def raw_session(http: Any, url: str, key: str) -> dict[str, str]:
    """The headers of an MCP session opened by hand on ``http`` (an ``httpx2`` client or the
    module): ``initialize``, then ``notifications/initialized``, neither of which the rate limit
    counts."""
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {key}"}
    opened = http.post(url, json=initialize_body(), headers=headers, timeout=30)
    assert opened.status_code == 200, opened.text
    headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    headers["Mcp-Protocol-Version"] = initialize_body()["params"]["protocolVersion"]
    note = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202, note.text
    return headers


def tool_call_body(id: Any, tool: str = "list_lessons") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
