"""The team server: MCP streamable HTTP at ``/mcp`` with API keys, rate limits and ``/healthz``.

The app is the SDK's own streamable-HTTP app (bearer auth through our
``ApiKeyVerifier``), with these additions: a per-key sliding-window rate limit that
answers 429 with ``Retry-After``; an unauthenticated ``GET /healthz`` that also
checks the database; and, outside the SDK's authentication, ``AuthGuard``, which
answers 503 / ``UNAVAILABLE`` when the key store cannot be asked (an outage is not
a bad key) and limits failed authentication per client address before any lookup.
Shutdown on SIGTERM stops accepting connections, lets every MCP request in flight
finish for up to the drain time, then exits whatever is still running.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import ipaddress
import json
import logging
import math
import os
import sys
import threading
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
from lore_mcp.auth import KeyLookupUnavailable, caller_of
from lore_mcp.server import LoreServer
from stores.errors import StoreError

logger = logging.getLogger("lore_mcp.http")

MCP_PATH = "/mcp"
WINDOW_S = 60.0
# How long SIGTERM waits for MCP requests in flight before closing everything anyway.
DRAIN_TIMEOUT_S = 30.0
# After the drain time, this long for the rest of shutdown before the process exits regardless.
EXIT_GRACE_S = 2.0
# The exit status when requests or shutdown were still running at the deadline (0 after a clean drain).
EXIT_AFTER_DEADLINE = 1
# Failed authentications (401) one client address may make per minute; beyond, 429 before any lookup.
FAILED_AUTH_PER_MINUTE = 30
# How long /healthz waits for the database.
HEALTH_TIMEOUT_S = 5.0
# Addresses and keys tracked at once; beyond, the stalest are forgotten.
MAX_TRACKED = 10_000
# JSON-RPC's range for server-defined errors.
RATE_LIMITED_JSONRPC_CODE = -32029
UNAVAILABLE_JSONRPC_CODE = -32030


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
        wait = self.wait(key)
        if wait is None:
            self.record(key)
        return wait

    def wait(self, key: str) -> float | None:
        """Without recording anything: None when a hit would be allowed, else the seconds until it would."""
        hits = self._hits.get(key)
        if not hits:
            return None
        now = self.clock()
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        if len(hits) >= self.limit:
            return hits[0] + self.window - now
        return None

    def record(self, key: str) -> None:
        """Count a hit whatever the limit (for events that have already happened)."""
        if key not in self._hits and len(self._hits) >= MAX_TRACKED:
            self._forget_stale()
        self._hits.setdefault(key, collections.deque()).append(self.clock())

    def _forget_stale(self) -> None:
        """Drop keys with no hit in the window; if that is not enough, the oldest half."""
        cutoff = self.clock() - self.window
        for key in [k for k, hits in self._hits.items() if not hits or hits[-1] <= cutoff]:
            del self._hits[key]
        if len(self._hits) >= MAX_TRACKED:
            for key in list(self._hits)[: len(self._hits) // 2]:
                del self._hits[key]


async def send_jsonrpc_error(
    send: Send, *, status: int, code: int, message: str, retry_after: int, data: dict[str, Any] | None = None
) -> None:
    """An HTTP error whose body is a JSON-RPC error, so MCP clients show the reason, not a bare status."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(retry_after).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
                await send_jsonrpc_error(
                    send,
                    status=429,
                    code=RATE_LIMITED_JSONRPC_CODE,
                    message=f"RATE_LIMITED: more than {self.limiter.limit} requests in a minute "
                    f"with this API key; retry after {retry_after} s.",
                    retry_after=retry_after,
                    data={"retry_after": retry_after},
                )
                return
        await self.app(scope, receive, send)


def client_address(scope: Scope) -> str:
    """Whom to count failed authentication against: the client's IP (an IPv6 client's /64)."""
    client = scope.get("client")
    host = client[0] if client else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def bearer_digest(scope: Scope) -> str | None:
    """SHA-256 of the request's bearer token, if it has one."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return hashlib.sha256(value[7:]).hexdigest()
    return None


class AuthGuard:
    """ASGI middleware outside the SDK's authentication.

    - A key lookup that could not be made (``KeyLookupUnavailable``: the database is
      down or not answering) is answered 503 / ``UNAVAILABLE``, not 401: the key may
      be fine.
    - Failed authentication (any 401: no key, a malformed, unknown or revoked one) is
      counted per client address. Past ``FAILED_AUTH_PER_MINUTE``, requests to ``/mcp``
      from that address get 429 with ``Retry-After`` before any lookup, unless they
      carry a key this server accepted before (so one misconfigured client behind a
      shared address does not lock out its neighbours; that key is still checked).
      The 401 itself is unchanged: every kind of failure gets the same answer.
    """

    def __init__(self, app: ASGIApp, failures: SlidingWindowLimiter) -> None:
        self.app = app
        self.failures = failures
        self._accepted: collections.OrderedDict[str, None] = collections.OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        address = client_address(scope)
        if scope.get("path", "").startswith(MCP_PATH):
            wait = self.failures.wait(address)
            if wait is not None and bearer_digest(scope) not in self._accepted:
                retry_after = max(1, math.ceil(wait))
                await send_jsonrpc_error(
                    send,
                    status=429,
                    code=RATE_LIMITED_JSONRPC_CODE,
                    message=f"RATE_LIMITED: more than {self.failures.limit} failed authentications in a "
                    f"minute from this address; retry after {retry_after} s with a valid API key.",
                    retry_after=retry_after,
                    data={"retry_after": retry_after},
                )
                return
        started = False

        async def watch(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self._note(scope, address, message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except KeyLookupUnavailable:
            if started:
                raise
            await send_jsonrpc_error(
                send,
                status=503,
                code=UNAVAILABLE_JSONRPC_CODE,
                message="UNAVAILABLE: The team server's database is unreachable or not answering, so it "
                "could not check the API key; nothing was done. Try again shortly.",
                retry_after=5,
            )

    def _note(self, scope: Scope, address: str, status: int) -> None:
        if status == 401:
            self.failures.record(address)
            return
        if isinstance(scope.get("user"), AuthenticatedUser):
            digest = bearer_digest(scope)
            if digest is not None:
                self._accepted[digest] = None
                self._accepted.move_to_end(digest)
                while len(self._accepted) > MAX_TRACKED:
                    self._accepted.popitem(last=False)


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
        self.counter.started += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.counter.active -= 1


class RequestCounter:
    """MCP requests (POST and DELETE) running now and started since the process began.

    Shutdown drains on ``active``; ``/healthz`` reports both, so an operator (or a test)
    can see what a SIGTERM would wait for.
    """

    def __init__(self) -> None:
        self.active = 0
        self.started = 0

    def as_json(self) -> dict[str, int]:
        return {"in_flight": self.active, "started": self.started}


def build_app(
    server: LoreServer,
    *,
    host: str,
    health: Callable[[], Any],
    store_name: str,
    rate_limit_per_minute: int,
    counter: RequestCounter | None = None,
    failed_auth_per_minute: int = FAILED_AUTH_PER_MINUTE,
) -> Any:
    """The ASGI app: the SDK's streamable-HTTP app plus /healthz, the guards and the request count."""
    requests = counter or RequestCounter()

    @server.custom_route("/healthz", methods=["GET"], include_in_schema=False)
    async def healthz(_request: Request) -> JSONResponse:
        try:
            with anyio.fail_after(HEALTH_TIMEOUT_S):
                await anyio.to_thread.run_sync(health, abandon_on_cancel=True)
        except (StoreError, TimeoutError) as exc:
            detail = str(exc) or f"The database did not answer within {HEALTH_TIMEOUT_S:.0f} s."
            body = {"status": "unavailable", "store": store_name, "version": __version__, "detail": detail}
            return JSONResponse({**body, "requests": requests.as_json()}, status_code=503)
        body = {"status": "ok", "store": store_name, "version": __version__}
        return JSONResponse({**body, "requests": requests.as_json()})

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    # First, so it runs outside the SDK's authentication and sees what it raises and answers.
    app.user_middleware.insert(
        0, Middleware(AuthGuard, failures=SlidingWindowLimiter(failed_auth_per_minute))
    )
    # Appended, so these run inside the SDK's authentication middleware and see the caller.
    app.user_middleware.append(Middleware(RateLimit, limiter=SlidingWindowLimiter(rate_limit_per_minute)))
    app.user_middleware.append(Middleware(InFlight, counter=requests))
    return app


class DrainingServer(uvicorn.Server):
    """uvicorn, but shutdown waits for MCP requests in flight rather than for every connection.

    A client's GET notification stream stays open for as long as its session lives, so
    waiting for all connections to close would always run into the timeout.

    Shutdown is bounded whatever a request is doing. A request blocked in a worker
    thread (on a database that stopped answering, say) cannot be cancelled, and the
    interpreter would wait for that thread at exit; so once the drain time is over with
    requests still running, the process exits at once (status ``EXIT_AFTER_DEADLINE``),
    and a timer started with the shutdown exits it ``EXIT_GRACE_S`` later if anything
    else (closing sessions, the store, leftover threads) still holds it.
    ``hard_exit=False`` leaves the process alone (for a server run inside another program).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        counter: RequestCounter,
        *,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
        hard_exit: bool = True,
    ) -> None:
        super().__init__(config)
        self.counter = counter
        self.drain_timeout_s = drain_timeout_s
        self.hard_exit = hard_exit

    async def shutdown(self, sockets: Any = None) -> None:
        if self.hard_exit:
            timer = threading.Timer(
                self.drain_timeout_s + EXIT_GRACE_S, _exit_now, args=("shutdown did not finish in time",)
            )
            timer.daemon = True
            timer.start()
        await super().shutdown(sockets)
        # uvicorn re-raises the signal it caught once it has shut down, so the process would
        # die "killed by SIGTERM"; after a clean drain, exit normally (status 0) instead.
        self._captured_signals.clear()

    async def _wait_tasks_to_complete(self) -> None:
        deadline = time.monotonic() + self.drain_timeout_s
        while self.counter.active and time.monotonic() < deadline and not self.force_exit:
            await asyncio.sleep(0.05)
        if self.counter.active:
            message = f"{self.counter.active} MCP requests still running after {self.drain_timeout_s:g} s"
            if self.hard_exit:
                _exit_now(message)
            logger.error("shutting down with %s", message)


def _exit_now(why: str) -> None:
    """Leave at once, without waiting for threads that may never finish."""
    logger.error("exiting without waiting: %s", why)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(EXIT_AFTER_DEADLINE)


async def serve_http(
    server: LoreServer,
    *,
    host: str,
    port: int,
    health: Callable[[], Any],
    store_name: str,
    rate_limit_per_minute: int,
    log_level: str = "WARNING",
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
) -> None:
    """Serve until SIGTERM or SIGINT, then drain for up to ``drain_timeout_s`` (see ``DrainingServer``)."""
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
        # Beyond the drain time, so DrainingServer, not uvicorn, decides when draining ends.
        timeout_graceful_shutdown=math.ceil(drain_timeout_s) + 1,
        lifespan="on",
    )
    await DrainingServer(config, counter, drain_timeout_s=drain_timeout_s).serve()
