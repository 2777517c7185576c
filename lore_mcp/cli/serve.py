"""``lore-memory mcp``: serve MCP over stdio (the default), over streamable HTTP as a team
server, or over stdio forwarding every call to a team server (``LORE_STORE=remote``)."""

from __future__ import annotations

import argparse
import contextlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lore_mcp.cli.common import open_or_report, report_failure, say
from lore_mcp.settings import Settings

if TYPE_CHECKING:
    from lore_mcp.app import App
    from lore_mcp.transport.server import LogLevel, LoreServer


def run_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """``lore-memory mcp``: over stdio, or with ``--transport http`` as a team server."""
    level = args.log_level.upper()
    if args.transport == "stdio":
        return serve(settings, log_level=level)
    return serve_http(
        settings,
        host=args.host,
        port=args.port,
        log_level=level,
        no_auth=args.dev_no_auth,
        public_url=args.public_url,
    )


def serve(settings: Settings, *, log_level: LogLevel = "WARNING") -> int:
    """Serve at once; the store opens, and the model starts loading, on a thread once a handshake
    is answered (a client waits for ``initialize`` with a timeout, and importing numpy, the store
    and ONNX Runtime holds the GIL); the first call waits for the store."""
    if settings.store == "remote":
        return serve_remote(settings, log_level=log_level)
    import anyio

    from lore_mcp.app import App, check_store

    check_store(settings)  # before serving: a store that cannot open is reported after the handshake
    with App(settings) as app, contextlib.suppress(KeyboardInterrupt):
        server = app.server(with_keys="admin" in settings.tool_groups, log_level=log_level)
        return 0 if anyio.run(_serve_stdio, app, server) else 1
    return 0


# Requests answered before the store opens: opening beside them would slow their answer.
_HANDSHAKES = ("initialize", "server/discover", "ping")


async def _serve_stdio(app: App, server: LoreServer) -> bool:
    """Serve until input ends, opening the store on a thread once a handshake is answered (before
    any other request, or when input ends); False at once if it cannot open (reason on stderr)."""
    import anyio
    import anyio.to_thread

    started = anyio.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="lore-open") as pool:
        opening: list[Future[bool]] = []

        def start() -> None:  # on the event loop's thread only
            if not opening:
                opening.append(pool.submit(_open, app))
                started.set()

        async def open_beside(ctx: Any, call_next: Any) -> Any:
            if ctx.method not in _HANDSHAKES:
                start()  # this request may wait for the store (LoreServer.ready)
            try:
                return await call_next(ctx)
            finally:
                start()

        async def serve_then_open() -> None:
            await server.run_stdio_async()
            start()  # input ended first: still say why the store cannot open

        server.middleware.append(open_beside)
        async with anyio.create_task_group() as group:
            group.start_soon(serve_then_open)
            await started.wait()
            opened = await anyio.to_thread.run_sync(opening[0].result)
            if not opened:
                group.cancel_scope.cancel()
    return opened


def _open(app: App) -> bool:
    """Open ``app``'s store as every command does, saying on stderr why not (or that it is
    read-only); the model loads beside it, once numpy is imported here (two threads importing
    numpy at once can each find it half made)."""
    import numpy  # noqa: F401

    app.embedder.start()
    try:
        opened = open_or_report(app.settings, read_only="warn")
    except Exception as exc:  # one line, as main() gives it: no traceback on the terminal
        report_failure(exc)
        opened = None
    app.attach(opened.store if opened is not None else None)
    return opened is not None


def serve_remote(settings: Settings, *, log_level: LogLevel) -> int:
    """stdio, forwarding every call to the team server at LORE_API_URL (see ``lore_mcp.transport.remote``)."""
    import anyio

    from lore_mcp.app import remote_server

    if not settings.api_url or not settings.api_key:
        return say("LORE_STORE=remote needs LORE_API_URL and LORE_API_KEY.", 2)
    try:
        server = remote_server(
            settings.api_url,
            settings.api_key,
            default_project=settings.project if "project" in settings.model_fields_set else None,
            tools=settings.tool_groups,
            log_level=log_level,
        )
    except ValueError as exc:
        return say(str(exc), 2)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(server.run_stdio_async)
    return 0


def _http_refusal(settings: Settings, *, host: str, no_auth: bool, public_url: str | None) -> str | None:
    """Why the settings cannot make a team server (remote has no data; no keys: loopback only)."""
    from lore_mcp.transport import http

    if settings.store == "remote":
        return "a team server serves its own store; use LORE_STORE=local or postgres."
    if public_url is not None and not _is_base_url(public_url):
        return (
            f"--public-url must be the base URL clients reach the server at, such as "
            f"https://lore.example.com (no path, query or fragment), not {public_url!r}."
        )
    if settings.stateless_http and settings.store == "postgres" and not settings.request_state_keys:
        return (
            "LORE_STATELESS_HTTP serves replicas behind a load balancer, which must share one "
            "LORE_REQUEST_STATE_SECRET (the same 32 or more random characters on every replica, made with "
            'python -c "import secrets; print(secrets.token_hex(32))"), so that a request one replica '
            "started can be finished on another."
        )
    if no_auth and not http.is_loopback(host):
        return (
            f"--dev-no-auth serves without API keys, so it only binds a loopback address "
            f"(127.0.0.1, ::1, localhost), not {host!r}."
        )
    return None


def _is_base_url(url: str) -> bool:
    parts = urlsplit(url)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not (parts.path.strip("/") or parts.query or parts.fragment)
    )


def _say_serving(settings: Settings, base: str, issuer: str | None) -> None:
    """Start-up lines: the endpoint and the OAuth state (``issuer`` None: no auth, said loudly)."""
    from lore_mcp.transport.guards import MCP_PATH
    from lore_mcp.transport.oauth.routes import oauth_possible

    if issuer is None:
        say(f"WARNING: serving WITHOUT authentication (--dev-no-auth) as org {settings.org!r}.")
    say(f"serving MCP at {base}{MCP_PATH}")
    if issuer is None:
        return
    if oauth_possible(issuer):
        say(f"OAuth for connectors (claude.ai, Claude Desktop) at {issuer}/mcp; API keys work as well.")
    else:
        say(
            f"OAuth is off: {issuer} is neither HTTPS nor loopback; pass --public-url https://your-host "
            "(behind a TLS proxy) to offer it. API keys work."
        )


def serve_http(
    settings: Settings,
    *,
    host: str,
    port: int,
    log_level: LogLevel = "WARNING",
    no_auth: bool = False,
    public_url: str | None = None,
) -> int:
    """The team server (``lore_mcp.transport.http``); ``public_url`` is also its OAuth issuer."""
    refusal = _http_refusal(settings, host=host, no_auth=no_auth, public_url=public_url)
    if refusal is not None:
        return say(refusal, 2)
    app = open_or_report(settings, read_only="warn")
    if app is None:
        return 1
    app.embedder.start()  # a server expects traffic; load the model now rather than on the first call
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    issuer = None if no_auth else (public_url or base).rstrip("/")
    with app, contextlib.suppress(KeyboardInterrupt):
        server = app.team_server(issuer_url=issuer, log_level=log_level)
        _say_serving(settings, base, issuer)
        run_http(
            app,
            server,
            host=host,
            port=port,
            log_level=log_level,
            trusted_proxies=settings.trusted_proxy_networks,
            stateless=settings.stateless_http,
            request_state_keys=settings.request_state_keys,
        )
    return 0


def run_http(app: App, server: LoreServer, **extra: Any) -> None:
    """``transport.http.serve_http`` with the app's parts (and ``extra``: host, port...), until it stops."""
    import anyio

    from lore_mcp.transport import http

    settings = app.settings
    anyio.run(
        lambda: http.serve_http(
            server,
            health=app.health,
            store_name=settings.store,
            rate_limit_per_minute=settings.rate_limit_per_minute,
            drain_timeout_s=settings.drain_timeout_s,
            call_counts=app.store.call_counts,
            **extra,
        )
    )
