"""MCP features beyond tools, resources and prompts: logging levels, completion and subscriptions.

``add_protocol_extras(server)`` adds to a built server:

- ``logging/setLevel``: each session picks the least severe level it wants to hear. From then
  on every ``tools/call`` it makes reports its duration as a ``debug`` log message on the
  call's own stream (so only with ``debug``). A session that never sets a level hears nothing.
  Server log lines are not forwarded: they can carry internal detail (database errors) that
  tools keep from clients.
- ``completion/complete``: lesson ids for the ``lore://lessons/{id}`` template, by prefix,
  among the newest lessons the caller can see; nothing, but no error, for prompt arguments
  (they are free text) and for resources without arguments. An unknown prompt, template or
  argument is invalid params (-32602), as the specification asks.
- ``resources/subscribe`` and ``resources/unsubscribe``: after a tool call changes memory,
  sessions subscribed to an affected URI (``lore://lessons/<id>``, ``lore://stats``,
  ``lore://schema``) get ``notifications/resources/updated``. Only for changes made through
  this server process, and only for changes to the project the subscriber's reads of those
  URIs show: its API key's project, or for a key of every project (and stdio) the server's
  default project, in the key's org. Lesson ids are unique per project, so the same id in
  another project, or another org, is another lesson and never notifies. Any URI may be
  subscribed, also one that does not exist yet (``import_lessons`` keeps ids), as the SDK's
  own ``subscriptions/listen`` does.
- ``prompts/get`` errors: an unknown prompt or bad arguments answer invalid params (-32602),
  where the SDK would answer error code 0.

The SDK declares the matching capabilities (``logging``, ``completions``,
``resources.subscribe``) from the handlers registered here.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

import anyio
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
    UnsubscribeRequestParams,
)

from lore_mcp.tools.context import caller as request_caller
from lore_mcp.tools.registry import ADMIN_TOOLS, LESSON_ID_TOOLS, SPECS
from lore_mcp.tools.resources import LESSON_TEMPLATE, SCHEMA_URI, STATS_URI, lesson_uri
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
MAX_SUBSCRIPTIONS = 1000  # per session
NOTIFY_TIMEOUT_S = 1.0  # a subscriber that stops reading must not hold up the caller's write

# Kept in each connection's ``state``, so they end with the session.
LOG_LEVEL_KEY = "lore_mcp.log_level"
SUBSCRIPTIONS_KEY = "lore_mcp.subscriptions"  # uri -> the subscriber's Reach


@dataclass(frozen=True)
class Reach:
    """One org and project: where a change happened, or what a subscription watches.

    ``org`` is None without API keys (stdio and --dev-no-auth serve a single org);
    ``project`` is None where this process cannot tell (remote mode, where the team
    server picks the project), which then matches any project of the org.
    """

    org: str | None
    project: str | None

    def hears(self, change: Reach) -> bool:
        """Whether a subscription watching ``self`` is told of ``change``."""
        if self.org != change.org:
            return False
        return self.project is None or change.project is None or self.project == change.project


def add_protocol_extras(server: MCPServer, lowlevel: Server[Any], default_project: str | None = None) -> None:
    """Register logging/setLevel, completion/complete and resources/(un)subscribe on ``server``,
    whose low-level server (where request handlers live) is ``lowlevel``.

    ``default_project`` is the project a call that names none acts on (and that the
    resources show to a key of every project); None when the server cannot know it.
    """
    extras = Extras(server, default_project)
    # add_request_handler directly: the constructor argument for logging warns that the
    # 2026-07-28 revision drops logging, but clients on the current revisions call it.
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, extras.set_level)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, extras.subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, extras.unsubscribe)
    server.completion()(extras.complete)
    prompts_get = lowlevel.get_request_handler("prompts/get")
    if prompts_get is not None:
        lowlevel.add_request_handler(
            "prompts/get", prompts_get.params_type, extras.checked_get_prompt(prompts_get.handler)
        )
    server.middleware.append(extras.after_tool_call)


def _connection(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The session's connection: its ``state`` outlives a request. The SDK hands handlers a
    per-request session proxy that holds it privately; ``None`` if a future SDK moves it."""
    return getattr(ctx.session, "_connection", None)


class Extras:
    """The handlers ``add_protocol_extras`` registers, and the subscriptions they share."""

    def __init__(self, server: MCPServer, default_project: str | None = None) -> None:
        self.server = server
        self.default_project = default_project
        # Connections with at least one subscription; dropped when their session ends.
        self.subscribers: weakref.WeakSet[Connection] = weakref.WeakSet()

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        connection = _connection(ctx)
        if connection is not None:
            connection.state[LOG_LEVEL_KEY] = params.level
        return EmptyResult()

    async def log(self, ctx: ServerRequestContext[Any, Any], level: LoggingLevel, message: str) -> None:
        """Send ``message`` on the current request's stream if its session asked for ``level``."""
        connection = _connection(ctx)
        wanted = connection.state.get(LOG_LEVEL_KEY) if connection is not None else None
        if wanted is None or LEVELS.index(level) < LEVELS.index(wanted) or ctx.request_id is None:
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
        with no project, so ``reach(None)`` is what a subscriber's URIs show."""
        caller = request_caller()
        if caller is not None and caller.project is not None:
            return Reach(caller.org, caller.project)
        return Reach(caller.org if caller is not None else None, requested or self.default_project)

    async def notify(self, change: Reach, uris: set[str] | None) -> None:
        """Tell each session watching one of ``uris`` (None: any) in ``change``'s project."""
        for connection in list(self.subscribers):
            subscriptions: dict[str, Reach] = connection.state.get(SUBSCRIPTIONS_KEY, {})
            hits: Iterable[str] = [
                uri
                for uri, watched in list(subscriptions.items())
                if watched.hears(change) and (uris is None or uri in uris)
            ]
            for uri in hits:
                with anyio.move_on_after(NOTIFY_TIMEOUT_S):
                    await connection.send_resource_updated(uri)

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
        if not failed and len(self.subscribers):
            arguments = params.get("arguments") or {}
            uris = self.changed_uris(name, arguments if isinstance(arguments, Mapping) else {}, result)
            if uris is None or uris:
                requested = arguments.get("project") if isinstance(arguments, Mapping) else None
                await self.notify(self.reach(requested if isinstance(requested, str) else None), uris)
        return result
