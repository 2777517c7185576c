"""The team server: the SDK's streamable HTTP at ``/mcp`` plus OAuth routes and the consent page, one 401
naming the protected-resource metadata, the guards (``guards``), ``/healthz``, streams ended on revocation,
replicas without affinity, the page (``ui``) and a SIGTERM that drains requests in flight."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from lore_mcp import __version__
from lore_mcp.key_tokens import caller_of
from lore_mcp.transport.guards import (
    FAILED_AUTH_PER_MINUTE,
    HEALTH_PATH,
    MCP_PATH,
    AuthGuard,
    BusyGuard,
    CallLimiter,
    ForwardedClient,
    RateLimit,
    SlidingWindowLimiter,
    StandingStreams,
    has_authorization,
)
from lore_mcp.transport.oauth.routes import LoreRequireAuth, refused_response
from lore_mcp.transport.oauth.tokens import LoreBearerVerifier
from lore_mcp.transport.protocol_extras import sessionless_handshake
from lore_mcp.transport.server import LoreServer
from lore_mcp.transport.ui.routes import ui_routes
from stores import CallCounts, StoreError

logger = logging.getLogger("lore_mcp.transport.http")

HEALTH_TIMEOUT_S = 5.0  # how long /healthz waits for the database
DRAIN_TIMEOUT_S = 30.0  # SIGTERM waits this long for MCP requests in flight, then closes everything
EXIT_GRACE_S = 2.0  # then this long for the rest of shutdown before the process exits regardless
EXIT_AFTER_DEADLINE = 1  # the exit status when anything still ran at the deadline (0 after a clean drain)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class RequestCounter:
    """MCP requests (POST, DELETE) running and started: shutdown drains on ``active``, ``/healthz`` reports
    both. A GET on ``/mcp`` is a standing stream that never ends by itself, so it is not counted."""

    def __init__(self) -> None:
        self.active, self.started = 0, 0

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope.get("method") == "GET":
                await app(scope, receive, send)
                return
            self.active += 1
            self.started += 1
            try:
                await app(scope, receive, send)
            finally:
                self.active -= 1

        return counted


def build_app(
    server: LoreServer,
    *,
    host: str,
    health: Callable[[], Any],
    store_name: str,
    rate_limit_per_minute: int,
    counter: RequestCounter | None = None,
    failed_auth_per_minute: int = FAILED_AUTH_PER_MINUTE,
    trusted_proxies: Sequence[str] = (),
    call_counts: CallCounts | None = None,
    stateless: bool = False,
    request_state_keys: Sequence[str] = (),
) -> Any:
    """The ASGI app, served with ``server_config``. Only a TCP peer in ``trusted_proxies`` may name the
    client by ``X-Forwarded-For``; ``call_counts`` shares counts across processes."""
    requests = counter or RequestCounter()
    _add_healthz(server, health=health, store_name=store_name, requests=requests)
    if request_state_keys:
        share_request_state(server, request_state_keys)
    if stateless:
        sessionless_handshake(server.lowlevel)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, stateless_http=stateless)
    _install_routes(app, server)
    proxies = [Middleware(ForwardedClient, trusted_hosts=list(trusted_proxies))] if trusted_proxies else []
    failures = SlidingWindowLimiter(failed_auth_per_minute)
    # Outside the SDK's authentication, so AuthGuard sees what it raises and answers; the proxy
    # headers outermost, so every guard counts against the client a trusted proxy names.
    app.user_middleware[:0] = [*proxies, Middleware(AuthGuard, failures=failures, shared=call_counts)]
    gate = [Middleware(BusyGuard, gate=server.heavy_gate)] if server.heavy_gate is not None else []
    streams = StandingStreams(MCP_PATH, server._token_verifier)
    # Inside it, so these see the caller.
    app.user_middleware += [
        Middleware(RateLimit, limiter=CallLimiter(rate_limit_per_minute, call_counts)),
        *gate,
        Middleware(requests.middleware),
        Middleware(streams.middleware),
    ]
    server.middleware.append(streams.after_revoke)
    return app


def share_request_state(server: LoreServer, keys: Sequence[str]) -> None:
    """Seal ``requestState`` with ``keys[0]``, open with any (not the SDK's per-process key), so any replica
    opens what another sealed. Swapped in place, so the SDK's middleware order stays."""
    boundary = RequestStateBoundary(RequestStateSecurity(keys=list(keys)), default_audience=server.name)
    server.middleware[:] = [boundary if isinstance(m, RequestStateBoundary) else m for m in server.middleware]


def resource_metadata_url(server: LoreServer) -> str | None:
    """The protected-resource metadata URL (RFC 9728) every 401 names; None without OAuth."""
    url = server.settings.auth.resource_server_url if server.settings.auth is not None else None
    return str(build_resource_metadata_url(url)) if url is not None else None


def _install_routes(app: Any, server: LoreServer) -> None:
    """The verifier's OAuth routes first, so they answer, not the SDK's; ``/mcp`` refuses with Lore's 401.
    The page for people (``ui``) is static files calling /mcp like any client, under its Host checks."""
    app.router.routes.extend(ui_routes(server.session_manager.security_settings))
    if isinstance(server._token_verifier, LoreBearerVerifier):  # the SDK keeps the verifier private
        app.router.routes[0:0] = server._token_verifier.routes
    for route in app.router.routes:
        guard = getattr(route, "app", None)
        if getattr(route, "path", None) == MCP_PATH and type(guard) is RequireAuthMiddleware:
            route.app = LoreRequireAuth(guard.app, guard.required_scopes, guard.resource_metadata_url)


def _add_healthz(
    server: LoreServer, *, health: Callable[[], Any], store_name: str, requests: RequestCounter
) -> None:
    """/healthz: status for anyone, store, version and load for root; 503 when the store is too slow."""

    async def healthz(request: Request) -> Response:
        # The same Host and Origin checks as /mcp (DNS-rebinding protection on loopback).
        refused = await TransportSecurityMiddleware(
            server.session_manager.security_settings
        ).validate_request(request)
        if refused is not None:
            return refused
        user = request.scope.get("user")
        if has_authorization(request.scope) and not isinstance(user, AuthenticatedUser):
            return refused_response(resource_metadata_url(server))
        caller = caller_of(user.access_token) if isinstance(user, AuthenticatedUser) else server.local_caller
        details = caller is not None and caller.root
        try:
            with anyio.fail_after(HEALTH_TIMEOUT_S):
                await anyio.to_thread.run_sync(health, abandon_on_cancel=True)
        except (StoreError, TimeoutError) as exc:
            detail = str(exc) or f"The database did not answer within {HEALTH_TIMEOUT_S:.0f} s."
            return answer({"status": "unavailable", "detail": detail}, details, 503)
        # Heavy calls waiting for a slot mean a busy server, not a broken one: still 200.
        load = server.heavy_gate.load() if server.heavy_gate is not None else None
        body: dict[str, Any] = {"status": "busy" if load is not None and load.saturated else "ok"}
        if load is not None:
            body["heavy_calls"] = {"running": load.running, "waiting": load.waiting, "slots": load.total}
        return answer(body, details)

    def answer(body: dict[str, Any], details: bool, status_code: int = 200) -> JSONResponse:
        if not details:
            return JSONResponse({"status": body["status"]}, status_code)
        full = {"status": body.pop("status"), "store": store_name, "version": __version__, **body}
        in_flight = {"in_flight": requests.active, "started": requests.started}
        return JSONResponse({**full, "requests": in_flight}, status_code)

    route: Any = server.custom_route  # the SDK leaves its decorator untyped
    route(HEALTH_PATH, methods=["GET"], include_in_schema=False)(healthz)


def server_config(
    app: Any, *, host: str, port: int, log_level: str, drain_timeout_s: float
) -> uvicorn.Config:
    """uvicorn's config, proxy headers off: it would believe ``X-Forwarded-For`` from any loopback peer,
    letting clients behind a proxy choose what their failed logins count against."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        # Beyond the drain time, so DrainingServer, not uvicorn, decides when draining ends.
        timeout_graceful_shutdown=math.ceil(drain_timeout_s) + 1,
        lifespan="on",
        proxy_headers=False,
    )


class DrainingServer(uvicorn.Server):
    """uvicorn, but SIGTERM waits for MCP requests, not every connection (a GET stream lives as long as its
    session). Bounded: a thread blocked on a silent database cannot be cancelled and would hold the exit, so
    past the drain time the process exits, and a timer ``EXIT_GRACE_S`` later if anything still holds it."""

    def __init__(
        self,
        config: uvicorn.Config,
        counter: RequestCounter,
        *,
        drain_timeout_s: float,
        closing: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.counter, self.closing, self.drain_timeout_s = counter, closing, drain_timeout_s

    async def shutdown(self, sockets: Any = None) -> None:
        timer = threading.Timer(
            self.drain_timeout_s + EXIT_GRACE_S, _exit_now, args=("shutdown did not finish in time",)
        )
        timer.daemon = True
        timer.start()
        if self.closing is not None:
            self.closing()
        await super().shutdown(sockets)
        # uvicorn re-raises the caught signal ("killed by SIGTERM"); after a clean drain, exit 0 instead.
        self._captured_signals.clear()

    async def _wait_tasks_to_complete(self) -> None:
        deadline = time.monotonic() + self.drain_timeout_s
        while self.counter.active and time.monotonic() < deadline and not self.force_exit:
            await asyncio.sleep(0.05)
        if self.counter.active:
            _exit_now(f"{self.counter.active} MCP requests still running after {self.drain_timeout_s:g} s")


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
    log_level: str = "WARNING",
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    sockets: Sequence[socket.socket] | None = None,
    **app_options: Any,
) -> None:
    """Serve ``build_app`` until SIGTERM/SIGINT, then drain; on ``sockets`` if given, else ``host:port``."""
    counter = RequestCounter()
    app = build_app(server, host=host, counter=counter, **app_options)
    config = server_config(app, host=host, port=port, log_level=log_level, drain_timeout_s=drain_timeout_s)
    closing = server.listen_streams.close if server.listen_streams is not None else None
    draining = DrainingServer(config, counter, drain_timeout_s=drain_timeout_s, closing=closing)
    await draining.serve(sockets=list(sockets) if sockets is not None else None)
