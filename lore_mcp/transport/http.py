"""The team server: MCP streamable HTTP at ``/mcp`` with API keys or OAuth, rate limits and ``/healthz``.

The app is the SDK's own streamable-HTTP app (bearer auth through ``LoreBearerVerifier``:
API keys, and OAuth access tokens where the server offers OAuth; or ``ApiKeyVerifier``
alone), with these additions: the OAuth routes and consent page
(``lore_mcp.transport.oauth``); one 401 for every refused credential, naming the
protected-resource metadata; a per-key limit on tool calls, shared by every
process on one Postgres (``lore_mcp.transport.call_limit``), that answers 429 with
``Retry-After``; ``GET /healthz``, which checks the database and the
``Host`` header as ``/mcp`` does, and shows details only to a root key; standing streams
that end when their key is revoked (``lore_mcp.transport.streams``); replicas without affinity
(``stateless``: handshake-era requests served without sessions, as 2026-07-28 ones always are;
``request_state_keys``: one request-state key ring for every replica); and, outside the SDK's
authentication, ``AuthGuard``, which answers 503 / ``UNAVAILABLE`` when the key store
cannot be asked (an outage is not a bad key) and limits failed authentication per client
address before any lookup. The client address is the TCP peer's, or, from a trusted
reverse proxy (``LORE_TRUSTED_PROXIES``), the right-most address in ``X-Forwarded-For``
that is not itself a trusted proxy (the proxy's own if that entry is not an address). Errors the guards answer carry the JSON-RPC id of
the request they refuse. Shutdown on SIGTERM stops accepting connections, lets every MCP
request in flight finish for up to the drain time, then exits whatever is still running.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.transport_security import TransportSecurityMiddleware
from pydantic import AnyHttpUrl
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from lore_mcp import __version__
from lore_mcp.key_tokens import caller_of
from lore_mcp.transport.auth_guard import AuthGuard
from lore_mcp.transport.call_limit import CallLimiter, RateLimit, call_limiter
from lore_mcp.transport.capabilities import sessionless_handshake
from lore_mcp.transport.draining import DRAIN_TIMEOUT_S, DrainingServer
from lore_mcp.transport.guards import (
    FAILED_AUTH_PER_MINUTE,
    HEALTH_PATH,
    MCP_PATH,
    BusyGuard,
    ForwardedClient,
    SlidingWindowLimiter,
    has_authorization,
)
from lore_mcp.transport.oauth.routes import LoreRequireAuth, refused_response
from lore_mcp.transport.oauth.tokens import LoreBearerVerifier
from lore_mcp.transport.server import LoreServer
from lore_mcp.transport.streams import StandingStreams
from lore_mcp.transport.ui.routes import ui_routes
from stores.errors import StoreError
from stores.store import CallCounts

logger = logging.getLogger("lore_mcp.transport.http")

# How long /healthz waits for the database.
HEALTH_TIMEOUT_S = 5.0


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    trusted_proxies: Sequence[str] = (),
    call_counts: CallCounts | None = None,
    stateless: bool = False,
    request_state_keys: Sequence[str] = (),
) -> Any:
    """The ASGI app: the SDK's streamable-HTTP app plus /healthz, the guards and the request count.

    Serve it with ``server_config``, which leaves forwarded headers to this app: only a
    request whose TCP peer is in ``trusted_proxies`` (addresses and networks) has its client
    address taken from ``X-Forwarded-For``. ``call_counts`` is the store's shared count of tool
    calls and failed authentications (``Store.call_counts``); without one, each process counts
    its own. ``stateless`` serves handshake-era requests without sessions
    (``LORE_STATELESS_HTTP``); ``request_state_keys`` is ``LORE_REQUEST_STATE_SECRET``'s ring
    (empty: the SDK's key of this process alone).
    """
    requests = counter or RequestCounter()
    _add_healthz(server, health=health, store_name=store_name, requests=requests)
    if request_state_keys:
        share_request_state(server, request_state_keys)
    if stateless:
        sessionless_handshake(server.lowlevel)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, stateless_http=stateless)
    _install_oauth(app, resource_metadata_url(server))
    _install_ui(app, server)
    _install_guards(
        app,
        server,
        requests=requests,
        limiter=call_limiter(rate_limit_per_minute, call_counts),
        failed_auth_per_minute=failed_auth_per_minute,
        trusted_proxies=trusted_proxies,
        call_counts=call_counts,
    )
    return app


def share_request_state(server: LoreServer, keys: Sequence[str]) -> None:
    """Seal and open ``requestState`` with ``keys`` (the first seals, all open) instead of the key
    the SDK made for this process alone, so a round that one replica sealed is opened by any other.

    The SDK installs its boundary when the server is built; it is swapped here, in place, so the
    middleware order (inside OpenTelemetry, outside Lore's own) stays the SDK's.
    """
    boundary = RequestStateBoundary(RequestStateSecurity(keys=list(keys)), default_audience=server.name)
    chain = server.middleware
    chain[:] = [boundary if isinstance(m, RequestStateBoundary) else m for m in chain]


def resource_metadata_url(server: LoreServer) -> str | None:
    """Where this server's protected-resource metadata is (RFC 9728), which every 401 names;
    None when it serves none (no OAuth: no public URL, or no authentication at all)."""
    auth = server.settings.auth
    if auth is None or auth.resource_server_url is None:
        return None
    return str(build_resource_metadata_url(auth.resource_server_url))


def _install_oauth(app: Any, metadata_url: str | None) -> None:
    """Serve the OAuth routes of the verifier's authorization server (none for API keys alone),
    first so that they answer their paths rather than the SDK's defaults, and let ``/mcp``
    answer a refused credential with Lore's 401 (``lore_mcp.transport.oauth.routes.refusal``)."""
    verifier = token_verifier_of(app)
    if isinstance(verifier, LoreBearerVerifier):
        app.router.routes[0:0] = verifier.routes
    for route in app.router.routes:
        guard = getattr(route, "app", None)
        if getattr(route, "path", None) == MCP_PATH and type(guard) is RequireAuthMiddleware:
            route.app = LoreRequireAuth(
                guard.app, guard.required_scopes, AnyHttpUrl(metadata_url) if metadata_url else None
            )


def _install_ui(app: Any, server: LoreServer) -> None:
    """Serve the page for people at ``/ui`` (``lore_mcp.transport.ui``): static files that
    call ``/mcp`` like any client, under the same Host and Origin checks."""
    app.router.routes.extend(ui_routes(server.session_manager.security_settings))


def _add_healthz(
    server: LoreServer, *, health: Callable[[], Any], store_name: str, requests: RequestCounter
) -> None:
    """Route /healthz on ``server``, before its app is built: plain status for anyone, the
    store, version and load for a root caller, 503 when the store does not answer in time."""

    @server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)
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
            down = {"status": "unavailable", "store": store_name, "version": __version__, "detail": detail}
            return JSONResponse(health_body(down, requests) if details else {"status": "unavailable"}, 503)
        # Heavy calls waiting for a slot mean a busy server, not a broken one: still 200.
        load = server.heavy_gate.load() if server.heavy_gate is not None else None
        status = "busy" if load is not None and load.saturated else "ok"
        body: dict[str, Any] = {"status": status, "store": store_name, "version": __version__}
        if load is not None:
            body["heavy_calls"] = {"running": load.running, "waiting": load.waiting, "slots": load.total}
        return JSONResponse(health_body(body, requests) if details else {"status": status})


def _install_guards(
    app: Any,
    server: LoreServer,
    *,
    requests: RequestCounter,
    limiter: CallLimiter,
    failed_auth_per_minute: int,
    trusted_proxies: Sequence[str],
    call_counts: CallCounts | None,
) -> None:
    """Wrap the SDK's app in the guards, each placed for what it must see: the auth guard and
    the proxy headers outside the SDK's authentication, the limits and counters inside it."""
    # First, so it runs outside the SDK's authentication and sees what it raises and answers.
    app.user_middleware.insert(
        0,
        Middleware(AuthGuard, failures=SlidingWindowLimiter(failed_auth_per_minute), shared=call_counts),
    )
    if trusted_proxies:
        # Outermost: every guard counts against the client the trusted proxy names.
        app.user_middleware.insert(0, Middleware(ForwardedClient, trusted_hosts=list(trusted_proxies)))
    # Appended, so these run inside the SDK's authentication middleware and see the caller.
    app.user_middleware.append(Middleware(RateLimit, limiter=limiter))
    if server.heavy_gate is not None:
        app.user_middleware.append(Middleware(BusyGuard, gate=server.heavy_gate))
    app.user_middleware.append(Middleware(InFlight, counter=requests))
    streams = StandingStreams(MCP_PATH, token_verifier_of(app))
    app.user_middleware.append(Middleware(streams.middleware))
    server.middleware.append(streams.after_revoke)


def health_body(body: dict[str, Any], requests: RequestCounter) -> dict[str, Any]:
    return {**body, "requests": requests.as_json()}


def token_verifier_of(app: Any) -> Any:
    """The verifier the SDK's authentication middleware checks bearer tokens with (None without auth)."""
    for middleware in app.user_middleware:
        backend = middleware.kwargs.get("backend")
        if isinstance(backend, BearerAuthBackend):
            return backend.token_verifier
    return None


def server_config(
    app: Any, *, host: str, port: int, log_level: str, drain_timeout_s: float
) -> uvicorn.Config:
    """uvicorn's configuration for the team server.

    uvicorn's own proxy-header handling is off: by default it believes ``X-Forwarded-For``
    from any loopback peer (and ``FORWARDED_ALLOW_IPS``), which would let every client of a
    server bound to 127.0.0.1 behind a proxy choose the address its failed logins count
    against. ``build_app`` applies the same middleware with ``LORE_TRUSTED_PROXIES`` instead.
    """
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
    trusted_proxies: Sequence[str] = (),
    call_counts: CallCounts | None = None,
    stateless: bool = False,
    request_state_keys: Sequence[str] = (),
    sockets: Sequence[socket.socket] | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, then drain for up to ``drain_timeout_s`` (see ``DrainingServer``);
    on ``sockets`` already listening where given (``lore-memory ui``), else on ``host`` and ``port``."""
    counter = RequestCounter()
    app = build_app(
        server,
        host=host,
        health=health,
        store_name=store_name,
        rate_limit_per_minute=rate_limit_per_minute,
        counter=counter,
        trusted_proxies=trusted_proxies,
        call_counts=call_counts,
        stateless=stateless,
        request_state_keys=request_state_keys,
    )
    config = server_config(app, host=host, port=port, log_level=log_level, drain_timeout_s=drain_timeout_s)
    listen = server.listen_streams
    closing = listen.close if listen is not None else None
    draining = DrainingServer(config, counter, drain_timeout_s=drain_timeout_s, closing=closing)
    await draining.serve(sockets=list(sockets) if sockets is not None else None)
