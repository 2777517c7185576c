"""The per-key rate limit on ``tools/call`` (one per batch element); handshakes and listings are free. On
Postgres the count is in the database (a fixed window per key, one statement per call), so N replicas
give a key its limit, not N times it; on SQLite (one process) in memory."""

from __future__ import annotations

import logging
from typing import Any

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from lore_mcp.transport.guards import (
    MCP_PATH,
    WINDOW_S,
    SlidingWindowLimiter,
    authenticated_post,
    jsonrpc_message,
    refuse_too_many,
)
from stores import CallCounts, StoreError

logger = logging.getLogger("lore_mcp.transport.call_limit")


class CallLimiter:
    """A key's allowance of ``limit`` tool calls a minute: in ``counts`` where the store shares one (an
    unreachable database lets calls through: they will say it is down), else in this process's memory."""

    def __init__(self, limit: int, counts: CallCounts | None = None) -> None:
        self.limit = limit
        self._counts = counts
        self._window = SlidingWindowLimiter(limit)

    async def take(self, key_id: str, calls: int) -> float | None:
        """Count ``calls`` if they fit (None); else the seconds until they would."""
        if self._counts is None:
            return self._window.hit(key_id, calls)
        try:
            return await anyio.to_thread.run_sync(self._counts.take, key_id, calls, self.limit, int(WINDOW_S))
        except StoreError as exc:
            logger.warning("rate limit not checked, the database did not answer: %s", exc)
            return None


def tool_calls(message: Any) -> int:
    """How many ``tools/call`` requests a JSON-RPC message (or batch) holds."""
    batch = message if isinstance(message, list) else [message]
    return sum(1 for item in batch if isinstance(item, dict) and item.get("method") == "tools/call")


class RateLimit:
    """Inside auth: past ``limiter.limit`` tool calls per key a minute, 429 ``RATE_LIMITED``. Only an
    authenticated POST can hold a tool call, so only its body is read (once)."""

    def __init__(self, app: ASGIApp, limiter: CallLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = authenticated_post(scope)
        if caller is None or not scope.get("path", "").startswith(MCP_PATH):
            await self.app(scope, receive, send)
            return
        message, receive = await jsonrpc_message(scope, receive)
        calls = tool_calls(message)
        # A person on Lore's page (``Caller.person``) has a second, equal budget under the same key: curating
        # never spends what the key's agents may call, nor gets more than a key.
        budget = f"{caller.key_id}/page" if caller.person else caller.key_id
        wait = await self.limiter.take(budget, calls) if calls else None
        if wait is not None:
            who = "on Lore's page" if caller.person else "with this API key"
            why = f"{self.limiter.limit} tool calls in a minute {who}"
            await refuse_too_many(scope, receive, send, wait, why)
            return
        await self.app(scope, receive, send)
