"""The team server's per-key rate limit: it counts tool calls, and on Postgres every server
process shares the count.

What is counted is a JSON-RPC request whose method is ``tools/call`` (one per such element of
a batch). Everything else a client sends is free: ``initialize``, discovery, ``tools/list``,
``resources/*``, ``prompts/*``, pings, notifications, a GET stream, a DELETE. A client's
handshake and listings therefore never eat into the budget its tool calls need.

Where the count lives follows the store (``stores.Store.call_counts``): on Postgres, in the
database, one statement per counted call (``stores.postgres.call_counts``: a fixed window per
key), so N replicas behind a load balancer give a key its limit, not N times it; on SQLite,
which one process serves by design, in that process's memory (an exact sliding window,
``SlidingWindowLimiter``).

A person on Lore's page (``Caller.person``: the page's OAuth client or ``lore-memory ui``'s
key, known from the credential) counts in a second budget of the same size under the same key,
so a curating session never uses up the calls that key's agents have, nor gets more than a key.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from lore_mcp.key_tokens import caller_of
from lore_mcp.transport.guards import (
    MCP_PATH,
    WINDOW_S,
    SlidingWindowLimiter,
    jsonrpc_message,
    refuse_too_many,
)
from stores.errors import StoreError
from stores.store import CallCounts

logger = logging.getLogger("lore_mcp.transport.call_limit")

TOOL_CALL = "tools/call"


class CallLimiter(Protocol):
    """Takes tool calls from a key's allowance of ``limit`` per minute."""

    limit: int

    async def take(self, key_id: str, calls: int) -> float | None:
        """Count ``calls`` for ``key_id`` if they fit: None when counted, else the seconds until
        they would fit (nothing counted)."""
        ...


class LocalCallLimiter:
    """The count in this process's memory (SQLite: one process serves a file)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._window = SlidingWindowLimiter(limit)

    async def take(self, key_id: str, calls: int) -> float | None:
        return self._window.hit(key_id, calls)


class SharedCallLimiter:
    """The count in the database every server process shares (Postgres), asked on a worker
    thread. When the database cannot be asked, the call is let through, not refused: the
    limit guards capacity, and the call itself will say the database is unavailable."""

    def __init__(self, counts: CallCounts, limit: int) -> None:
        self.limit = limit
        self._counts = counts

    async def take(self, key_id: str, calls: int) -> float | None:
        try:
            return await anyio.to_thread.run_sync(self._counts.take, key_id, calls, self.limit, int(WINDOW_S))
        except StoreError as exc:
            logger.warning("rate limit not checked, the database did not answer: %s", exc)
            return None


def call_limiter(limit: int, counts: CallCounts | None) -> CallLimiter:
    """The shared count where the store offers one, else this process's own."""
    return SharedCallLimiter(counts, limit) if counts is not None else LocalCallLimiter(limit)


def tool_calls(message: Any) -> int:
    """How many ``tools/call`` requests a JSON-RPC message (or batch) holds."""
    batch = message if isinstance(message, list) else [message]
    return sum(1 for item in batch if isinstance(item, dict) and item.get("method") == TOOL_CALL)


class RateLimit:
    """ASGI middleware (inside auth): at most ``limiter.limit`` tool calls per API key per
    minute; beyond, 429 ``RATE_LIMITED`` with ``Retry-After``, carrying the call's id.

    Only an authenticated POST to ``/mcp`` can hold a tool call, so only its body is read
    (once: see ``jsonrpc_message``); ``/healthz``, GET streams and DELETE pass untouched."""

    def __init__(self, app: ASGIApp, limiter: CallLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user") if scope["type"] == "http" else None
        caller = caller_of(user.access_token) if isinstance(user, AuthenticatedUser) else None
        if caller is None or scope.get("method") != "POST" or not scope.get("path", "").startswith(MCP_PATH):
            await self.app(scope, receive, send)
            return
        message, receive = await jsonrpc_message(scope, receive)
        calls = tool_calls(message)
        # A person's page counts in a budget of its own, as large as a key's: curating never
        # spends what the key's agents may call, and the page gets no more than one key does.
        budget = f"{caller.key_id}/page" if caller.person else caller.key_id
        wait = await self.limiter.take(budget, calls) if calls else None
        if wait is not None:
            who = "on Lore's page" if caller.person else "with this API key"
            why = f"{self.limiter.limit} tool calls in a minute {who}"
            await refuse_too_many(scope, receive, send, wait, why)
            return
        await self.app(scope, receive, send)
