"""Legacy ``resources/subscribe``: a session hears ``resources/updated`` for a watched URI a notice names
in the project its reads show. Any URI may be watched, even one not yet existing (an import keeps ids).
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from lore_mcp.transport.logging_level import connection_of
from lore_mcp.transport.notices import MAX_URIS, Notice, NoticeBus, Reach

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext

MAX_SUBSCRIPTIONS = MAX_URIS  # per session
NOTIFY_TIMEOUT_S = 1.0  # a subscriber that stops reading must not hold up the others
MAX_PENDING = 1000  # notices waiting per session; older ones are dropped beyond it
# Kept in each connection's ``state``, so they end with the session.
SUBSCRIPTIONS_KEY = "lore_mcp.subscriptions"  # uri -> the subscriber's Reach
PENDING_KEY = "lore_mcp.pending_notices"  # URIs waiting to be sent, in order


class LegacySubscriptions:
    """The sessions' subscriptions, heard from ``bus``; ``reach(None)`` is where this request reads."""

    def __init__(self, bus: NoticeBus, reach: Callable[[str | None], Reach]) -> None:
        self.bus = bus
        self.reach = reach
        # Connections with at least one subscription; dropped when their session ends.
        self.subscribers: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._hearing = False  # whether the subscribers listen on the bus yet
        self._sending: set[asyncio.Task[None]] = set()  # one per session with notices to send
        self._busy: weakref.WeakSet[Connection] = weakref.WeakSet()  # the sessions those tasks serve

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        connection = connection_of(ctx)
        if connection is None:
            raise MCPError(INVALID_PARAMS, "Subscriptions need a session.")
        subscriptions: dict[str, Reach] = connection.state.setdefault(SUBSCRIPTIONS_KEY, {})
        uri = str(params.uri)
        if uri not in subscriptions and len(subscriptions) >= MAX_SUBSCRIPTIONS:
            raise MCPError(INVALID_PARAMS, f"A session may hold at most {MAX_SUBSCRIPTIONS} subscriptions.")
        subscriptions[uri] = self.reach(None)
        self.subscribers.add(connection)
        if not self._hearing:
            self._hearing = True
            self.bus.subscribe(self.hear)
        await self.bus.ready()
        return EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        connection = connection_of(ctx)
        if connection is not None:
            connection.state.get(SUBSCRIPTIONS_KEY, {}).pop(str(params.uri), None)
        return EmptyResult()

    def hear(self, notice: Notice) -> None:
        """On the loop: queue ``notice`` for each session watching its URIs, starting its sender if none."""
        for connection in list(self.subscribers):
            subscriptions: dict[str, Reach] = connection.state.get(SUBSCRIPTIONS_KEY, {})
            hits = notice.hits(
                uri for uri, watched in list(subscriptions.items()) if watched.hears(notice.reach)
            )
            if not hits:
                continue
            pending = connection.state.setdefault(PENDING_KEY, collections.deque(maxlen=MAX_PENDING))
            pending.extend(hits)
            if connection not in self._busy:
                self._busy.add(connection)
                task = asyncio.get_running_loop().create_task(self._send(connection, pending))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _send(self, connection: Connection, pending: collections.deque[str]) -> None:
        """Send waiting notices in order; a session not reading loses one per ``NOTIFY_TIMEOUT_S``."""
        try:
            while pending:
                uri = pending.popleft()
                with anyio.move_on_after(NOTIFY_TIMEOUT_S):
                    await connection.send_resource_updated(uri)
        finally:
            self._busy.discard(connection)
