"""MCP features beyond tools, resources and prompts: logging levels, completion and subscriptions.

``add_protocol_extras(server)`` adds to a built server:

- Log messages on the stream of the request they are about: every ``tools/call`` reports its
  duration as a ``debug`` message. A legacy session picks the least severe level it wants with
  ``logging/setLevel`` (it hears nothing until it does); on the 2026-07-28 revision each request
  asks with ``_meta["io.modelcontextprotocol/logLevel"]`` and hears nothing without it. Server
  log lines are not forwarded: they can carry internal detail (database errors) that tools keep
  from clients.
- ``completion/complete``: lesson ids for the ``lore://lessons/{id}`` template, by prefix,
  among the newest lessons the caller can see; nothing, but no error, for prompt arguments
  (they are free text) and for resources without arguments. An unknown prompt, template or
  argument is invalid params (-32602), as the specification asks.
- Change notices (``lore_mcp.transport.notices``): after a tool call changes memory, one notice
  on the server's ``NoticeBus`` (across processes on Postgres). Legacy sessions hear it through
  ``resources/subscribe`` and ``resources/unsubscribe``, current-revision clients through
  ``subscriptions/listen`` (``ScopedListen``); both as ``notifications/resources/updated`` for an
  affected URI they watch (``lore://lessons/<id>``, ``lore://stats``, ``lore://schema``), and only
  for changes to the project the subscriber's reads of those URIs show: its API key's project,
  or for a key of every project (and stdio) the server's default project, in the key's org.
  Lesson ids are unique per project, so the same id in another project, or another org, is
  another lesson and never notifies. Any URI may be subscribed, also one that does not exist
  yet (``import_lessons`` keeps ids), as the SDK's own ``subscriptions/listen`` does.
- ``prompts/get`` errors: an unknown prompt or bad arguments answer invalid params (-32602),
  where the SDK would answer error code 0.
- ``server/discover`` (2026-07-28) advertises what that era is served: ``resources.subscribe``
  (through ``subscriptions/listen``) and ``logging`` (per request), but no ``listChanged``,
  since Lore publishes none. The legacy handshake's capabilities follow from the handlers
  registered here (``logging``, ``completions``, ``resources.subscribe``).
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, get_args

import anyio
from mcp.server.connection import allowed_log_levels
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmptyResult,
    GetPromptRequestParams,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from lore_mcp.tools.context import caller as request_caller
from lore_mcp.tools.registry import ADMIN_TOOLS, LESSON_ID_TOOLS, SPECS
from lore_mcp.tools.resources import LESSON_TEMPLATE, SCHEMA_URI, STATS_URI, lesson_uri
from lore_mcp.transport.capabilities import honest_discover
from lore_mcp.transport.notices import MAX_URIS, Notice, NoticeBus, Reach, ScopedListen
from stores.engine.lessons import MAX_LIST_LIMIT

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

# Severity ascending (RFC 5424), as the SDK's literal declares them.
LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)
MAX_COMPLETIONS = 100  # the specification's cap on values per response
COMPLETION_SCAN = 500  # newest lessons searched for an id prefix
MAX_SUBSCRIPTIONS = MAX_URIS  # per session
NOTIFY_TIMEOUT_S = 1.0  # a subscriber that stops reading must not hold up the others
MAX_PENDING = 1000  # notices waiting per legacy session; older ones are dropped beyond it

# Kept in each connection's ``state``, so they end with the session.
LOG_LEVEL_KEY = "lore_mcp.log_level"
SUBSCRIPTIONS_KEY = "lore_mcp.subscriptions"  # uri -> the subscriber's Reach
PENDING_KEY = "lore_mcp.pending_notices"  # URIs waiting to be sent, in order


__all__ = ["Extras", "Reach", "add_protocol_extras"]


def add_protocol_extras(
    server: MCPServer, lowlevel: Server[Any], default_project: str | None = None, bus: NoticeBus | None = None
) -> ScopedListen:
    """Register logging/setLevel, completion/complete, resources/(un)subscribe,
    subscriptions/listen and server/discover on ``server``, whose low-level server (where
    request handlers live) is ``lowlevel``.

    ``default_project`` is the project a call that names none acts on (and that the
    resources show to a key of every project); None when the server cannot know it.
    ``bus`` carries change notices (an in-process one if None). Returns the listen handler,
    whose ``close`` ends the open listen streams (a server shutting down calls it).
    """
    extras = Extras(server, default_project, bus or NoticeBus())
    # add_request_handler directly: the constructor argument for logging warns that the
    # 2026-07-28 revision drops logging, but clients on the current revisions call it.
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, extras.set_level)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, extras.subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, extras.unsubscribe)
    # The verifier of a team server's API keys and OAuth tokens (None on stdio): the SDK keeps it
    # private, and a listen stream must stop hearing once its key is revoked.
    verifier = getattr(server, "_token_verifier", None)
    listen = ScopedListen(extras.bus, lambda: extras.reach(None), verifier)
    lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)
    discover = lowlevel.get_request_handler("server/discover")
    if discover is not None:
        lowlevel.add_request_handler(
            "server/discover", discover.params_type, honest_discover(discover.handler)
        )
    server.completion()(extras.complete)
    prompts_get = lowlevel.get_request_handler("prompts/get")
    if prompts_get is not None:
        lowlevel.add_request_handler(
            "prompts/get", prompts_get.params_type, extras.checked_get_prompt(prompts_get.handler)
        )
    server.middleware.append(extras.after_tool_call)
    return listen


def _connection(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The session's connection: its ``state`` outlives a request. The SDK hands handlers a
    per-request session proxy that holds it privately; ``None`` if a future SDK moves it."""
    return getattr(ctx.session, "_connection", None)


class Extras:
    """The handlers ``add_protocol_extras`` registers, and the subscriptions they share."""

    def __init__(self, server: MCPServer, default_project: str | None, bus: NoticeBus) -> None:
        self.server = server
        self.default_project = default_project
        self.bus = bus
        # Connections with at least one legacy subscription; dropped when their session ends.
        self.subscribers: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._hearing = False  # whether the legacy subscribers listen on the bus yet
        self._sending: set[asyncio.Task[None]] = set()  # one per session with notices to send
        self._busy: weakref.WeakSet[Connection] = weakref.WeakSet()  # the sessions those tasks serve

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        connection = _connection(ctx)
        if connection is not None:
            connection.state[LOG_LEVEL_KEY] = params.level
        return EmptyResult()

    async def log(self, ctx: ServerRequestContext[Any, Any], level: LoggingLevel, message: str) -> None:
        """Send ``message`` on the current request's stream if the request (2026-07-28) or its
        session (legacy) asked for ``level`` or a less severe one."""
        if ctx.request_id is None or level not in levels_heard(ctx):
            return
        notification = LoggingMessageNotification(
            params=LoggingMessageNotificationParams(level=level, logger="lore", data=message)
        )
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    def checked_get_prompt(self, inner: Any) -> Any:
        async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> Any:
            if params.name not in {p.name for p in await self.server.list_prompts()}:
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
            try:
                return await inner(ctx, params)
            except ValueError as exc:  # how the SDK reports missing or invalid prompt arguments
                raise MCPError(INVALID_PARAMS, str(exc)) from None

        return get_prompt

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        if isinstance(ref, PromptReference):
            prompt = next((p for p in await self.server.list_prompts() if p.name == ref.name), None)
            if prompt is None:
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {ref.name}")
            if argument.name not in {a.name for a in prompt.arguments or []}:
                raise MCPError(INVALID_PARAMS, f"Prompt {ref.name} has no argument {argument.name!r}")
            return Completion(values=[])  # free text: nothing sensible to suggest
        templates = {t.uri_template for t in await self.server.list_resource_templates()}
        if ref.uri == LESSON_TEMPLATE and argument.name == "id":
            return await self.lesson_ids(argument.value)
        if ref.uri in templates:
            return Completion(values=[])
        if ref.uri in {str(r.uri) for r in await self.server.list_resources()}:
            return Completion(values=[])  # a plain resource has no arguments to complete
        raise MCPError(INVALID_PARAMS, f"Unknown resource template: {ref.uri}")

    async def lesson_ids(self, prefix: str) -> Completion:
        """Ids starting with ``prefix`` among the newest lessons of the caller's default project,
        read through ``list_lessons`` so that the caller's key scopes them (and remote mode
        forwards them)."""
        prefix = prefix.strip().upper()  # ULIDs are upper case
        found: list[str] = []
        cursor: str | None = None
        scanned = 0
        while scanned < COMPLETION_SCAN:
            arguments: dict[str, Any] = {"limit": MAX_LIST_LIMIT}
            if cursor is not None:
                arguments["cursor"] = cursor
            try:
                result = await self.server.call_tool("list_lessons", arguments)
            except ToolError:  # no list_lessons here (LORE_TOOLS), or the store failed
                break
            page = getattr(result, "structured_content", None)
            if getattr(result, "is_error", False) or not isinstance(page, Mapping):
                break
            lessons = page.get("lessons") or []
            scanned += len(lessons)
            found += [lesson["id"] for lesson in lessons if str(lesson.get("id", "")).startswith(prefix)]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        complete = not cursor
        return Completion(
            values=found[:MAX_COMPLETIONS],
            total=len(found) if complete else None,
            has_more=len(found) > MAX_COMPLETIONS or not complete,
        )

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        connection = _connection(ctx)
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
        connection = _connection(ctx)
        if connection is not None:
            connection.state.get(SUBSCRIPTIONS_KEY, {}).pop(str(params.uri), None)
        return EmptyResult()

    def changed_uris(
        self, name: str, arguments: Mapping[str, Any], result: Mapping[str, Any]
    ) -> set[str] | None:
        """URIs whose content a successful call of tool ``name`` may have changed; None: any."""
        structured = result.get("structuredContent") or {}
        if name == "save_lesson" and isinstance(structured.get("id"), str):
            return {lesson_uri(structured["id"]), STATS_URI}
        if name in LESSON_ID_TOOLS and isinstance(arguments.get("id"), str):
            return {lesson_uri(arguments["id"]), STATS_URI}
        if name == "import_lessons":
            lessons = arguments.get("lessons")
            ids = (
                [lesson.get("id") for lesson in lessons if isinstance(lesson, Mapping)]
                if isinstance(lessons, list)
                else []
            )
            return {lesson_uri(i) for i in ids if isinstance(i, str)} | {STATS_URI}
        if name == "apply":
            return {SCHEMA_URI, STATS_URI}
        if name in ADMIN_TOOLS:
            return set()  # keys are not resources
        spec = SPECS.get(name)
        if spec is not None and spec.annotations.read_only_hint:
            return set()
        return None  # revert_commit and any tool not described above

    def reach(self, requested: str | None) -> Reach:
        """The org and project a call of the current request acts on when it asks for project
        ``requested`` (None: the default), as ``LessonService.scope`` resolves it: a
        project-scoped key only ever reaches its own project. Every lessons resource reads
        with no project, so ``reach(None)`` is what a subscriber's URIs show.

        Without an API key the caller is the server's trusted local user, of the server's org:
        servers of other orgs may share a Postgres database, and so its notices."""
        caller = request_caller() or getattr(self.server, "local_caller", None)
        if caller is not None and caller.project is not None:
            return Reach(caller.org, caller.project)
        return Reach(caller.org if caller is not None else None, requested or self.default_project)

    def hear(self, notice: Notice) -> None:
        """A notice from the bus, on the event loop: queue it for each legacy session watching
        one of its URIs in its project, and start that session's sender if it has none."""
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
        """Send a session its waiting notices in order; one that stops reading loses a notice
        per ``NOTIFY_TIMEOUT_S`` rather than holding up anything else."""
        try:
            while pending:
                uri = pending.popleft()
                with anyio.move_on_after(NOTIFY_TIMEOUT_S):
                    await connection.send_resource_updated(uri)
        finally:
            self._busy.discard(connection)

    async def after_tool_call(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """Server middleware: after every tools/call, its duration as a debug log message, then
        the change notifications."""
        if ctx.method != "tools/call":
            return await call_next(ctx)
        started = time.perf_counter()
        result = await call_next(ctx)
        params = ctx.params or {}
        name = str(params.get("name", ""))
        failed = not isinstance(result, Mapping) or bool(result.get("isError"))
        elapsed_ms = (time.perf_counter() - started) * 1000
        await self.log(ctx, "debug", f"{name} {'failed' if failed else 'answered'} in {elapsed_ms:.0f} ms")
        if not failed:
            arguments = params.get("arguments") or {}
            uris = self.changed_uris(name, arguments if isinstance(arguments, Mapping) else {}, result)
            if uris is None or uris:
                requested = arguments.get("project") if isinstance(arguments, Mapping) else None
                reach = self.reach(requested if isinstance(requested, str) else None)
                await self.bus.publish(Notice(reach, None if uris is None else frozenset(uris)))
        return result


def levels_heard(ctx: ServerRequestContext[Any, Any]) -> Collection[LoggingLevel]:
    """The log levels the current request may be sent: on 2026-07-28, those its own
    ``_meta`` log level asks for (the SDK's rule); on the legacy handshake, those its
    session asked for with ``logging/setLevel`` (none before it does)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return allowed_log_levels(ctx.protocol_version, ctx.meta)
    connection = _connection(ctx)
    wanted = connection.state.get(LOG_LEVEL_KEY) if connection is not None else None
    return LEVELS[LEVELS.index(wanted) :] if wanted in LEVELS else ()
