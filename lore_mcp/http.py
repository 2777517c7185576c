"""The team server: MCP streamable HTTP at ``/mcp`` with API keys, rate limits and ``/healthz``.

The app is the SDK's own streamable-HTTP app (bearer auth through our
``ApiKeyVerifier``), with two additions: a per-key sliding-window rate limit that
answers 429 with ``Retry-After``, and an unauthenticated ``GET /healthz`` that
also checks the database. Shutdown on SIGTERM stops accepting connections, lets
every MCP request in flight finish, then closes the sessions.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from lore_mcp import __version__
from lore_mcp.auth import caller_of
from lore_mcp.server import LoreServer
from stores.errors import StoreError

logger = logging.getLogger("lore_mcp.http")

MCP_PATH = "/mcp"
WINDOW_S = 60.0
# How long SIGTERM waits for MCP requests in flight before closing everything anyway.
DRAIN_TIMEOUT_S = 30.0
# JSON-RPC's range for server-defined errors.
RATE_LIMITED_JSONRPC_CODE = -32029


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class SlidingWindowLimiter:
    """At most ``limit`` hits per key in any ``window`` seconds (an exact sliding log).

    In memory, per process: each replica of a server counts on its own.
    """

    def __init__(self, limit: int, window: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.window = window
        self.clock = clock
        self._hits: dict[str, collections.deque[float]] = {}

    def hit(self, key: str) -> float | None:
        """Record a hit; returns None when allowed, else the seconds until one would be."""
        now = self.clock()
        hits = self._hits.setdefault(key, collections.deque())
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        if len(hits) >= self.limit:
            return hits[0] + self.window - now
        hits.append(now)
        return None


class RateLimit:
    """ASGI middleware (inside auth) limiting requests per API key; 429 with Retry-After beyond it."""

    def __init__(self, app: ASGIApp, limiter: SlidingWindowLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user") if scope["type"] == "http" else None
        if isinstance(user, AuthenticatedUser):
            caller = caller_of(user.access_token)
            wait = self.limiter.hit(caller.key_id) if caller is not None else None
            if wait is not None:
                retry_after = max(1, math.ceil(wait))
                # A JSON-RPC error body, so MCP clients show the reason rather than a bare status.
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {
                            "code": RATE_LIMITED_JSONRPC_CODE,
                            "message": f"RATE_LIMITED: more than {self.limiter.limit} requests in a minute "
                            f"with this API key; retry after {retry_after} s.",
                            "data": {"retry_after": retry_after},
                        },
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 429,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(retry_after).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class InFlight:
    """ASGI middleware counting MCP requests being answered, so shutdown can wait for them.

    A GET on ``/mcp`` is a client's standing notification stream, not a request: it
    would never end by itself, so it is not counted.
    """

    def __init__(self, app: ASGIApp, counter: RequestCounter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") == "GET":
            await self.app(scope, receive, send)
            return
        self.counter.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.counter.active -= 1


class RequestCounter:
    def __init__(self) -> None:
        self.active = 0


def build_app(
    server: LoreServer,
    *,
    host: str,
    health: Callable[[], Any],
    store_name: str,
    rate_limit_per_minute: int,
    counter: RequestCounter | None = None,
) -> Any:
    """The ASGI app: the SDK's streamable-HTTP app plus /healthz, the rate limit and the request count."""

    @server.custom_route("/healthz", methods=["GET"], include_in_schema=False)
    async def healthz(_request: Request) -> JSONResponse:
        try:
            await anyio.to_thread.run_sync(health)
        except StoreError as exc:
            return JSONResponse(
                {"status": "unavailable", "store": store_name, "version": __version__, "detail": str(exc)},
                status_code=503,
            )
        return JSONResponse({"status": "ok", "store": store_name, "version": __version__})

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    # Appended, so these run inside the SDK's authentication middleware and see the caller.
    app.user_middleware.append(Middleware(RateLimit, limiter=SlidingWindowLimiter(rate_limit_per_minute)))
    app.user_middleware.append(Middleware(InFlight, counter=counter or RequestCounter()))
    return app


class DrainingServer(uvicorn.Server):
    """uvicorn, but shutdown waits for MCP requests in flight rather than for every connection.

    A client's GET notification stream stays open for as long as its session lives, so
    waiting for all connections to close would always run into the timeout.
    """

    def __init__(self, config: uvicorn.Config, counter: RequestCounter) -> None:
        super().__init__(config)
        self.counter = counter

    async def shutdown(self, sockets: Any = None) -> None:
        await super().shutdown(sockets)
        # uvicorn re-raises the signal it caught once it has shut down, so the process would
        # die "killed by SIGTERM"; after a clean drain, exit normally (status 0) instead.
        self._captured_signals.clear()

    async def _wait_tasks_to_complete(self) -> None:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.counter.active and time.monotonic() < deadline and not self.force_exit:
            await asyncio.sleep(0.05)
        if self.counter.active:
            logger.error("shutting down with %d MCP requests still running", self.counter.active)


async def serve_http(
    server: LoreServer,
    *,
    host: str,
    port: int,
    health: Callable[[], Any],
    store_name: str,
    rate_limit_per_minute: int,
    log_level: str = "WARNING",
) -> None:
    """Serve until SIGTERM or SIGINT, then drain (see ``DrainingServer``)."""
    counter = RequestCounter()
    app = build_app(
        server,
        host=host,
        health=health,
        store_name=store_name,
        rate_limit_per_minute=rate_limit_per_minute,
        counter=counter,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        timeout_graceful_shutdown=int(DRAIN_TIMEOUT_S),
        lifespan="on",
    )
    await DrainingServer(config, counter).serve()
