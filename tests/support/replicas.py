"""One MCP client whose HTTP requests alternate between replicas, as a load balancer without
session affinity would send them.

``RoundRobin`` is an ``httpx2`` transport: each request the client makes goes to the next
replica's base URL in turn (path and query kept), whatever came before it, and what went where
is recorded so a test can say which replica answered which call. The benchmark
(``benchmarks/load_replicas.py``) uses the same transport.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


@dataclass
class Sent:
    """One request as the round robin routed it: the replica, the HTTP method, and for a
    JSON-RPC request its method and (for ``tools/call``) the tool's name."""

    replica: int
    http_method: str
    rpc_method: str | None
    tool: str | None


@dataclass
class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends request ``i`` to ``bases[i % len(bases)]`` over one pooled transport; ``record``
    keeps each request's route in ``sent`` (off in the benchmark, which only counts)."""

    bases: Sequence[str]
    record: bool = True
    sent: list[Sent] = field(default_factory=list)
    requests: int = 0
    inner: httpx2.AsyncBaseTransport = field(default_factory=httpx2.AsyncHTTPTransport)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        replica = self.requests % len(self.bases)
        self.requests += 1
        target = urlsplit(self.bases[replica])
        request.url = request.url.copy_with(scheme=target.scheme, host=target.hostname, port=target.port)
        request.headers["Host"] = target.netloc
        if self.record:
            self.sent.append(Sent(replica, request.method, *_rpc_of(request)))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def tool_calls(self, tool: str | None = None) -> list[int]:
        """The replica each ``tools/call`` (of ``tool``, if given) went to, in order."""
        return [s.replica for s in self.sent if s.rpc_method == "tools/call" and tool in (None, s.tool)]


def _rpc_of(request: httpx2.Request) -> tuple[str | None, str | None]:
    """The JSON-RPC method and tool name of a POST body (None, None for anything else)."""
    if request.method != "POST":
        return None, None
    try:
        body: Any = json.loads(request.content)
    except ValueError:
        return None, None
    if not isinstance(body, dict):
        return None, None
    params = body.get("params")
    tool = params.get("name") if body.get("method") == "tools/call" and isinstance(params, dict) else None
    return body.get("method"), tool


@contextlib.asynccontextmanager
async def alternating_client(
    urls: Sequence[str], key: str, *, mode: str, **client_options: Any
) -> AsyncIterator[tuple[Client, RoundRobin]]:
    """An MCP client (``mode``: ``legacy`` or a 2026-07-28 pin) whose requests alternate between
    the ``/mcp`` endpoints ``urls``, with its round robin to see where each went. Entered and
    left in one task (not for a fixture: see ``tests.support.clients.connected``)."""
    robin = RoundRobin(bases=[f"{p.scheme}://{p.netloc}" for p in map(urlsplit, urls)])
    async with (
        httpx2.AsyncClient(transport=robin, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
        Client(streamable_http_client(urls[0], http_client=http), mode=mode, **client_options) as client,
    ):
        yield client, robin
