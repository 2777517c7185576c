"""Logs on the stream of the request they are about: each ``tools/call``'s duration at ``debug``, for a
level set by ``logging/setLevel`` or ``_meta["io.modelcontextprotocol/logLevel"]``. Server log lines are
not forwarded: they can carry detail (database errors) that tools keep from clients.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, get_args

from mcp.server.connection import allowed_log_levels
from mcp_types import (
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext

# Severity ascending (RFC 5424), as the SDK's literal declares them.
LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)
# Kept in the connection's ``state``, so it ends with the session.
LOG_LEVEL_KEY = "lore_mcp.log_level"


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The connection, whose ``state`` outlives a request (the SDK's proxy holds it privately), or None."""
    return getattr(ctx.session, "_connection", None)


async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    connection = connection_of(ctx)
    if connection is not None:
        connection.state[LOG_LEVEL_KEY] = params.level
    return EmptyResult()


def levels_heard(ctx: ServerRequestContext[Any, Any]) -> Collection[LoggingLevel]:
    """Levels this request may be sent: its ``_meta``'s on 2026-07-28, else its session's (none unset)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return allowed_log_levels(ctx.protocol_version, ctx.meta)
    connection = connection_of(ctx)
    wanted = connection.state.get(LOG_LEVEL_KEY) if connection is not None else None
    return LEVELS[LEVELS.index(wanted) :] if wanted in LEVELS else ()


async def log(ctx: ServerRequestContext[Any, Any], level: LoggingLevel, message: str) -> None:
    """Send ``message`` on the current request's stream if it may hear ``level``."""
    if ctx.request_id is None or level not in levels_heard(ctx):
        return
    notification = LoggingMessageNotification(
        params=LoggingMessageNotificationParams(level=level, logger="lore", data=message)
    )
    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


async def log_tool_duration(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """Server middleware: every ``tools/call``'s duration as a debug message."""
    if ctx.method != "tools/call":
        return await call_next(ctx)
    started = time.perf_counter()
    result = await call_next(ctx)
    name = str((ctx.params or {}).get("name", ""))
    failed = not isinstance(result, Mapping) or bool(result.get("isError"))
    elapsed_ms = (time.perf_counter() - started) * 1000
    await log(ctx, "debug", f"{name} {'failed' if failed else 'answered'} in {elapsed_ms:.0f} ms")
    return result
