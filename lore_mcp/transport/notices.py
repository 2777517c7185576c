"""Change notices: one bus for both eras (legacy subscriptions and listen streams). A change publishes one
``Notice`` (which resources, or "any", and ``Reach``); subscribers hear only what their caller would see.
Over Postgres ``LISTEN/NOTIFY`` the bus reaches every process, itself included; on SQLite, in process."""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ResourceUpdated, event_to_notification
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from lore_mcp.errors import LoreError
from lore_mcp.tools.context import Serving
from lore_mcp.tools.context import caller as request_caller
from lore_mcp.tools.registry import SPECS
from lore_mcp.transport.guards import still_verifies

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer

    from stores import NoticeFeed


logger = logging.getLogger("lore_mcp.transport")

URIS_PER_PAYLOAD = 100  # lesson URIs are ~45 bytes of JSON: well under Postgres's 8000-byte payload
READY_TIMEOUT_S = 5.0  # how long a new subscription waits for the feed's listening connection
MAX_STREAMS = 1024  # listen streams open at once per server, as the SDK's own handler
MAX_URIS = 1000  # resources one listen stream (or one legacy session) may watch
MAX_BUFFERED = 1024  # notices waiting for a listen stream's client; a fuller stream is ended
NOTIFY_TIMEOUT_S = 1.0  # a subscriber that stops reading must not hold up the others
MAX_PENDING = 1000  # notices waiting per session; older ones are dropped beyond it
# In each connection's ``state``, so they end with the session.
SUBSCRIPTIONS_KEY = "lore_mcp.subscriptions"  # uri -> the subscriber's Reach
PENDING_KEY = "lore_mcp.pending_notices"  # URIs waiting to be sent, in order


@dataclass(frozen=True)
class Reach:
    """Where a change happened or a subscription watches; ``project`` None (remote mode) matches any."""

    org: str | None
    project: str | None

    def hears(self, change: Reach) -> bool:
        """Whether a subscription watching ``self`` is told of ``change``."""
        return self.org == change.org and (change.project is None or self.project in (None, change.project))


@dataclass(frozen=True)
class Notice:
    """Resources that changed (``uris``; None: any of them) in ``reach``."""

    reach: Reach
    uris: frozenset[str] | None

    def hits(self, watched: Iterable[str]) -> list[str]:
        return [uri for uri in watched if self.uris is None or uri in self.uris]

    def payloads(self) -> list[dict[str, Any]]:
        """The JSON objects a ``NoticeFeed`` carries, each small enough for one."""
        base = {"org": self.reach.org, "project": self.reach.project}
        if self.uris is None:
            return [{**base, "uris": None}]
        uris = sorted(self.uris)
        return [
            {**base, "uris": uris[i : i + URIS_PER_PAYLOAD]}
            for i in range(0, max(len(uris), 1), URIS_PER_PAYLOAD)
        ]

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Notice | None:
        org, project, uris = payload.get("org"), payload.get("project"), payload.get("uris")
        listed = uris is None or (isinstance(uris, list) and all(isinstance(u, str) for u in uris))
        if not listed or not all(isinstance(v, str | None) for v in (org, project)):
            return None
        return cls(Reach(org, project), None if uris is None else frozenset(uris))


NoticeListener = Callable[[Notice], None]


class NoticeBus:
    """Fan-out to subscribers, over ``feed`` if any; listeners run on their loop, never block nor raise."""

    def __init__(self, feed: NoticeFeed | None = None) -> None:
        self.feed = feed
        self._lock = threading.Lock()
        self._listeners: dict[object, tuple[NoticeListener, asyncio.AbstractEventLoop]] = {}
        self._fed = False

    async def publish(self, notice: Notice) -> None:
        """Tell every subscriber on the feed; an unreachable feed costs others the notice, not the call."""
        if self.feed is None:
            self._fan_out(notice)
            await anyio.lowlevel.checkpoint()
            return
        try:
            for payload in notice.payloads():
                await anyio.to_thread.run_sync(self.feed.publish, payload)
        except Exception as exc:  # UnavailableError and whatever a feed raises
            logger.warning("could not publish a change notice to other processes: %s", exc)
            self._fan_out(notice)

    def subscribe(self, listener: NoticeListener) -> Callable[[], None]:
        """Call ``listener`` on the running loop with each notice; returns what stops it."""
        token = object()
        with self._lock:
            self._listeners[token] = (listener, asyncio.get_running_loop())
            feed = None if self._fed else self.feed  # the first subscriber starts the feed's listening
            self._fed = True
        if feed is not None:
            feed.subscribe(self._from_feed)
        return lambda: self._drop(token)

    def _drop(self, token: object) -> None:
        with self._lock:
            self._listeners.pop(token, None)

    async def ready(self) -> None:
        """Wait (``READY_TIMEOUT_S`` at most) until the feed's listening connection is open."""
        if self.feed is not None:
            await anyio.to_thread.run_sync(self.feed.wait_listening, READY_TIMEOUT_S)

    def _from_feed(self, payload: dict[str, Any]) -> None:
        """On the feed's thread: a notice from any process."""
        notice = Notice.from_payload(payload)
        if notice is not None:
            self._fan_out(notice)

    def _fan_out(self, notice: Notice) -> None:
        with self._lock:
            listeners = list(self._listeners.items())
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # the feed's thread
            here = None
        for token, (listener, loop) in listeners:
            if loop is here:
                _call(listener, notice)
                continue
            try:
                loop.call_soon_threadsafe(_call, listener, notice)
            except RuntimeError:  # that loop is closed: its subscriber is gone
                self._drop(token)


def _call(listener: NoticeListener, notice: Notice) -> None:
    try:
        listener(notice)
    except Exception:  # fan-out boundary: one subscriber must not starve the others
        logger.exception("a change-notice subscriber raised")


@dataclass(eq=False)
class ScopedListen:
    """``subscriptions/listen`` as the SDK's ``ListenHandler`` serves it (ack first, stamped frames, a
    client that stops reading ended at ``MAX_BUFFERED``), fed only what ``reach()`` would see. With a
    ``verifier``, each notice re-verifies the credential: a revoked or uncheckable key ends the stream."""

    bus: NoticeBus
    reach: Callable[[], Reach]
    verifier: TokenVerifier | None = None
    _streams: set[MemoryObjectSendStream[ResourceUpdated]] = field(default_factory=set, init=False)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        subscription_id, token = ctx.request_id, get_access_token()
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen needs a request id.")
        watched = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        if len(watched) > MAX_URIS:
            raise MCPError(INVALID_PARAMS, f"A listen stream may watch at most {MAX_URIS} resources.")
        if len(self._streams) >= MAX_STREAMS:
            raise MCPError(INTERNAL_ERROR, "This server has as many listen streams open as it serves.")
        # Only resource subscriptions are honoured: Lore's lists never change while it runs.
        honored = SubscriptionFilter(resource_subscriptions=watched or None)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[ResourceUpdated](MAX_BUFFERED)
        unsubscribe = self.bus.subscribe(self._deliverer(self.reach(), frozenset(watched), send))
        self._streams.add(send)
        with send, recv:
            try:
                await self.bus.ready()
                ack = SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                await ctx.session.send_notification(
                    SubscriptionsAcknowledgedNotification(params=ack), related_request_id=subscription_id
                )
                async for event in recv:
                    if self.verifier and token and not await still_verifies(self.verifier, token):
                        logger.info("ending a listen stream: its credential no longer verifies")
                        break
                    notification = event_to_notification(event, meta)
                    await ctx.session.send_notification(notification, related_request_id=subscription_id)
            finally:
                unsubscribe()
                self._streams.discard(send)
        return SubscriptionsListenResult(_meta=meta)

    def _deliverer(
        self, reach: Reach, watched: frozenset[str], send: MemoryObjectSendStream[ResourceUpdated]
    ) -> NoticeListener:
        def deliver(notice: Notice) -> None:
            if not reach.hears(notice.reach):
                return
            for uri in sorted(notice.hits(watched)):
                try:
                    send.send_nowait(ResourceUpdated(uri=uri))
                except anyio.ClosedResourceError:
                    return  # the stream is ending
                except anyio.WouldBlock:
                    logger.warning("a listen stream's client stopped reading; ending the stream")
                    self._streams.discard(send)
                    send.close()
                    return

        return deliver

    def close(self) -> None:
        """End every open listen stream gracefully (each sends its final result)."""
        for stream in list(self._streams):
            stream.close()


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The connection, whose ``state`` outlives a request (the SDK's proxy holds it privately), or None."""
    return getattr(ctx.session, "_connection", None)


class LegacySubscriptions:
    """Legacy ``resources/subscribe``: a session hears ``resources/updated`` for a watched URI a notice names
    in the project its reads show (``reach(None)``). Any URI may be watched, even one not yet existing (an
    import keeps ids)."""

    def __init__(self, bus: NoticeBus, reach: Callable[[str | None], Reach]) -> None:
        self.bus, self.reach = bus, reach
        self.subscribers: weakref.WeakSet[Connection] = weakref.WeakSet()  # each gone with its session
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
        if uri not in subscriptions and len(subscriptions) >= MAX_URIS:
            raise MCPError(INVALID_PARAMS, f"A session may hold at most {MAX_URIS} subscriptions.")
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
                with anyio.move_on_after(NOTIFY_TIMEOUT_S):
                    await connection.send_resource_updated(pending.popleft())
        finally:
            self._busy.discard(connection)


def caller_reach(server: MCPServer, local: bool) -> Callable[[str | None], Reach]:
    """Where this request acts for project ``requested`` (``reach(None)``: what resources show). Not
    ``local`` (remote mode), the team server decides: org and, unless named, project are unknown here."""

    def reach(requested: str | None) -> Reach:
        services = cast(Serving, server).services
        if not local or services is None:
            return Reach(None, requested)
        lessons = services.lessons
        caller = request_caller() or getattr(server, "local_caller", None)
        try:
            scope = lessons.scope(requested, caller)
        except LoreError:  # a project this key cannot reach; the call went to its own
            scope = lessons.scope(None, caller)
        return Reach(scope.org, scope.project)

    return reach


def change_notices(bus: NoticeBus, reach: Callable[[str | None], Reach]) -> Any:
    """Server middleware publishing on ``bus`` what each successful tool call changed: the URIs its registry
    entry names, where it acted (ids are per project: elsewhere, another lesson)."""

    async def after_tool_call(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        result = await call_next(ctx)
        params = ctx.params or {}
        spec = SPECS.get(str(params.get("name"))) if ctx.method == "tools/call" else None
        if spec is None or not isinstance(result, Mapping) or result.get("isError"):
            return result
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, Mapping) else {}
        uris = spec.changes(arguments, result.get("structuredContent") or {})
        if uris is None or uris:
            requested = arguments.get("project")
            await bus.publish(Notice(reach(requested if isinstance(requested, str) else None), uris))
        return result

    return after_tool_call
