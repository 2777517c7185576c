"""After a call changes memory, one ``Notice``: the URIs its registry entry names, where it acted. Only
subscribers whose reads show that project hear it (ids are per project: elsewhere, another lesson).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lore_mcp.errors import LoreError
from lore_mcp.tools.context import caller as request_caller
from lore_mcp.tools.registry import SPECS
from lore_mcp.transport.notices import Notice, NoticeBus, Reach

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer

    from lore_mcp.services.lessons import LessonService


def caller_reach(server: MCPServer, lessons: LessonService | None) -> Callable[[str | None], Reach]:
    """Where this request acts for project ``requested`` (``reach(None)``: what resources show). Without
    ``lessons`` (remote mode) the team server decides: org and, unless named, project are unknown here."""

    def reach(requested: str | None) -> Reach:
        if lessons is None:
            return Reach(None, requested)
        caller = request_caller() or getattr(server, "local_caller", None)
        try:
            scope = lessons.scope(requested, caller)
        except LoreError:  # a project this key cannot reach; the call went to its own
            scope = lessons.scope(None, caller)
        return Reach(scope.org, scope.project)

    return reach


class ChangeNotices:
    """Server middleware publishing on ``bus`` what each successful tool call changed."""

    def __init__(self, bus: NoticeBus, reach: Callable[[str | None], Reach]) -> None:
        self.bus = bus
        self.reach = reach

    async def after_tool_call(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
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
            reach = self.reach(requested if isinstance(requested, str) else None)
            await self.bus.publish(Notice(reach, uris))
        return result
