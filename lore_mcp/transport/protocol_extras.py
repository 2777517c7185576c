"""MCP features beyond tools, resources and prompts, wired here: request-stream logs, completion,
change notices via ``resources/subscribe`` or ``subscriptions/listen``, and an honest ``server/discover``.
The legacy handshake's capabilities follow from the handlers registered here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_types import (
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    UnsubscribeRequestParams,
)

from lore_mcp.transport.capabilities import honest_discover
from lore_mcp.transport.change_notices import ChangeNotices, caller_reach
from lore_mcp.transport.completion import Completer
from lore_mcp.transport.logging_level import log_tool_duration, set_level
from lore_mcp.transport.notices import NoticeBus, ScopedListen
from lore_mcp.transport.subscriptions import LegacySubscriptions

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

    from lore_mcp.services.lessons import LessonService


def add_protocol_extras(
    server: MCPServer, lowlevel: Server[Any], lessons: LessonService | None, bus: NoticeBus | None = None
) -> ScopedListen:
    """Register the extras (``lessons`` None: remote mode); returns the listen handler for shutdown."""
    bus = bus or NoticeBus()
    reach = caller_reach(server, lessons)
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
    server.middleware.extend([ChangeNotices(bus, reach).after_tool_call, log_tool_duration])
    return listen
