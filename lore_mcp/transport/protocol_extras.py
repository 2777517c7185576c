"""MCP features beyond tools, resources and prompts, wired here: completion, change notices via
``resources/subscribe`` or ``subscriptions/listen`` (``notices``), and logs on the stream of the request they
are about (each ``tools/call``'s duration at ``debug``; server log lines are not forwarded: they can carry
detail, such as database errors, that tools keep from clients). The legacy handshake's capabilities follow
from the handlers registered here; each era's handshake promises only what Lore serves (the SDK's more)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, get_args

from mcp.server.connection import allowed_log_levels
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    Completion,
    CompletionArgument,
    CompletionContext,
    DiscoverResult,
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

from lore_mcp.tools.registry import TOOLS
from lore_mcp.transport.notices import (
    LegacySubscriptions,
    NoticeBus,
    ScopedListen,
    caller_reach,
    change_notices,
    connection_of,
)
from stores import MAX_LIST_LIMIT

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer


SESSION_METHODS = ("logging/setLevel", "resources/subscribe", "resources/unsubscribe")
LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # severity ascending (RFC 5424)
LOG_LEVEL_KEY = "lore_mcp.log_level"  # in the connection's ``state``, so it ends with the session
MAX_COMPLETIONS = 100  # the specification's cap on values per response
COMPLETION_SCAN = 500  # newest items searched for an id prefix
# Template -> the tool whose pages list its ids.
LISTERS = {spec.completes: spec.name for spec in TOOLS if spec.completes is not None}


def add_protocol_extras(
    server: MCPServer, lowlevel: Server[Any], local: bool, bus: NoticeBus | None = None
) -> ScopedListen:
    """Add the extras (``local``: tools run here, not remote); returns the listen handler for shutdown."""
    bus = bus or NoticeBus()
    reach = caller_reach(server, local)
    legacy = LegacySubscriptions(bus, reach)
    # Directly: the constructor warns 2026-07-28 drops logging, but current clients call it.
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, legacy.subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, legacy.unsubscribe)
    # The SDK keeps the verifier private (None on stdio); a listen stream must stop once its key is revoked.
    listen = ScopedListen(bus, lambda: reach(None), getattr(server, "_token_verifier", None))
    lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)
    completer = Completer(server)
    register_completion: Any = server.completion  # the SDK leaves it untyped
    register_completion()(completer.complete)
    for method, wrap in (("server/discover", honest_discover), ("prompts/get", completer.checked_get_prompt)):
        entry = lowlevel.get_request_handler(method)
        if entry is not None:
            lowlevel.add_request_handler(method, entry.params_type, wrap(entry.handler))
    # Outermost first: the duration is logged before the notice goes out, as it excludes it.
    server.middleware.extend([change_notices(bus, reach), log_tool_duration])
    return listen


def honest_discover(inner: Any) -> Any:
    """``server/discover`` as the SDK answers it (``inner``), less the ``listChanged`` flags."""

    async def discover(ctx: ServerRequestContext[Any, Any], params: Any) -> DiscoverResult:
        result: DiscoverResult = await inner(ctx, params)
        capabilities = result.capabilities
        update: dict[str, Any] = {}
        for name in ("tools", "prompts", "resources"):
            capability = getattr(capabilities, name)
            if capability is not None:
                update[name] = capability.model_copy(update={"list_changed": False})
        return result.model_copy(update={"capabilities": capabilities.model_copy(update=update)})

    return discover


def sessionless_handshake(lowlevel: Server[Any]) -> None:
    """Without sessions a log level or subscription dies with its request, so ``initialize`` offers neither
    and those methods answer method not found (not a subscription that never notifies): a handshake-era
    client then knows to re-read. ``server/discover`` stays: its logs and listen need no session."""
    options = lowlevel.create_initialization_options

    def without_session_features(*args: Any, **kwargs: Any) -> Any:
        result = options(*args, **kwargs)
        capabilities = result.capabilities
        update: dict[str, Any] = {"logging": None}
        if capabilities.resources is not None:
            update["resources"] = capabilities.resources.model_copy(update={"subscribe": False})
        return result.model_copy(update={"capabilities": capabilities.model_copy(update=update)})

    lowlevel.create_initialization_options = without_session_features  # type: ignore[method-assign]
    for method in SESSION_METHODS:
        entry = lowlevel.get_request_handler(method)
        if entry is not None:  # kept registered: 2026-07-28's discover derives ``logging`` from it
            lowlevel.add_request_handler(method, entry.params_type, _not_offered)


async def _not_offered(ctx: Any, params: Any) -> Any:
    raise MCPError(
        METHOD_NOT_FOUND,
        "Method not found: this server keeps no sessions, so it holds no subscriptions or log "
        "levels; re-read resources instead.",
    )


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


async def log_tool_duration(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """Server middleware: every ``tools/call``'s duration as a debug message on its stream."""
    if ctx.method != "tools/call" or ctx.request_id is None or "debug" not in levels_heard(ctx):
        return await call_next(ctx)
    started = time.perf_counter()
    result = await call_next(ctx)
    name = str((ctx.params or {}).get("name", ""))
    failed = not isinstance(result, Mapping) or bool(result.get("isError"))
    took_ms = (time.perf_counter() - started) * 1000
    message = f"{name} {'failed' if failed else 'answered'} in {took_ms:.0f} ms"
    params = LoggingMessageNotificationParams(level="debug", logger="lore", data=message)
    await ctx.session.send_notification(
        LoggingMessageNotification(params=params), related_request_id=ctx.request_id
    )
    return result


class Completer:
    """``completion/complete``: the caller's newest ids by prefix for a template a tool ``completes``; nothing
    (no error) for free text. An unknown prompt, template or argument is -32602, as the specification asks,
    also from ``prompts/get`` (the SDK answers code 0)."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

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
        if ref.uri in LISTERS and argument.name == "id":
            return await self.ids(LISTERS[ref.uri], argument.value)
        templates = {t.uri_template for t in await self.server.list_resource_templates()}
        if ref.uri in templates or ref.uri in {str(r.uri) for r in await self.server.list_resources()}:
            return Completion(values=[])  # free text, or a plain resource with no arguments
        raise MCPError(INVALID_PARAMS, f"Unknown resource template: {ref.uri}")

    async def ids(self, lister: str, prefix: str) -> Completion:
        """Ids starting with ``prefix``, via tool ``lister`` so the caller's key scopes them (remote too)."""
        prefix = prefix.strip().upper()  # ULIDs are upper case
        found: list[str] = []
        cursor: str | None = None
        scanned = 0
        while scanned < COMPLETION_SCAN and (page := await self._page(lister, cursor)) is not None:
            lessons = page.get("lessons") or []
            scanned += len(lessons)
            found += [lesson["id"] for lesson in lessons if str(lesson.get("id", "")).startswith(prefix)]
            if not (cursor := page.get("next_cursor")):
                break
        complete = not cursor
        return Completion(
            values=found[:MAX_COMPLETIONS],
            total=len(found) if complete else None,
            has_more=len(found) > MAX_COMPLETIONS or not complete,
        )

    async def _page(self, lister: str, cursor: str | None) -> Mapping[str, Any] | None:
        """One page of ``lister``; None when it is not served here (LORE_TOOLS) or failed."""
        try:
            result = await self.server.call_tool(lister, {"limit": MAX_LIST_LIMIT, "cursor": cursor})
        except ToolError:
            return None
        page = getattr(result, "structured_content", None)
        return None if getattr(result, "is_error", False) or not isinstance(page, Mapping) else page

    def checked_get_prompt(self, inner: Any) -> Any:
        """``prompts/get`` as ``inner`` answers it, its errors as invalid params."""

        async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> Any:
            if params.name not in {p.name for p in await self.server.list_prompts()}:
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
            try:
                return await inner(ctx, params)
            except ValueError as exc:  # how the SDK reports missing or invalid prompt arguments
                raise MCPError(INVALID_PARAMS, str(exc)) from None

        return get_prompt
