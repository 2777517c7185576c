"""``lore-memory ui``: the page on 127.0.0.1, signed in with a run-only root key passed in the URL
fragment (never sent or logged) and revoked on stop: an agent's rules, nothing outlives the run."""

from __future__ import annotations

import argparse
import contextlib
import socket
from typing import TYPE_CHECKING

from lore_mcp.cli.common import open_or_report, say
from lore_mcp.settings import Settings
from lore_mcp.tools.registry import TOOL_GROUPS

if TYPE_CHECKING:
    from lore_mcp.app import App
    from lore_mcp.services.keys import CreatedKey
    from lore_mcp.transport.server import LogLevel

HOST = "127.0.0.1"
KEY_NAME = "ui"


def run_ui(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the page until Ctrl-C (or SIGTERM); the one-time key is revoked on the way out."""
    port, open_browser, log_level = args.port, not args.no_browser, args.log_level.upper()
    if settings.store == "remote":
        return say(
            "the page serves this machine's store; with LORE_STORE=remote, open the team server's /ui "
            "and sign in with your API key.",
            2,
        )
    try:
        listening = _listen(port)
    except OSError as exc:
        return say(f"UNAVAILABLE: cannot listen on {HOST}:{port} ({exc.strerror}).", 1)
    # Every group but keys (root gets those): the page has a view for each, whatever LORE_TOOLS.
    groups = ",".join(group for group in TOOL_GROUPS if group != "admin")
    app = open_or_report(settings.model_copy(update={"tools": groups}), read_only="warn")
    if app is None:
        listening.close()
        return 1
    app.embedder.start()
    with app, listening, contextlib.suppress(KeyboardInterrupt):
        key = one_time_key(app)
        try:
            _serve(app, listening, key, open_browser=open_browser, log_level=log_level)
        finally:
            app.keys.revoke_key(key.org, key.id)
            say("stopped; the page's key is revoked.")
    return 0


def one_time_key(app: App) -> CreatedKey:
    """A run-only root key (creating the org, which stdio never needed)."""
    org = app.settings.org
    if app.store.keys.get_org(org) is None:
        app.store.keys.create_org(org, org)
    return app.keys.create_key(org, name=KEY_NAME, project=None, root=True)


def _listen(port: int) -> socket.socket:
    """The socket, listening before the browser opens, so its first request waits in the backlog."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((HOST, port))
        listening.listen(128)
    except OSError:
        listening.close()
        raise
    return listening


def _serve(
    app: App, listening: socket.socket, key: CreatedKey, *, open_browser: bool, log_level: LogLevel
) -> None:
    """The team server's ``serve_http`` on ``listening``, after printing (and opening) the page."""
    import webbrowser

    from lore_mcp.cli.serve import run_http

    port = listening.getsockname()[1]
    base = f"http://{HOST}:{port}"
    server = app.team_server(issuer_url=base, log_level=log_level, people_keys=frozenset({key.id}))
    url = f"{base}/ui/#key={key.key}"
    print(f"lore-memory: the page for people is at {url}\nlore-memory: Ctrl-C stops it.", flush=True)
    if open_browser:
        webbrowser.open(url)
    run_http(app, server, host=HOST, port=port, log_level=log_level, sockets=[listening])
