"""``completion/complete``: the caller's newest ids by prefix for a template a tool ``completes``; nothing
(no error) for free text. An unknown prompt, template or argument is -32602, as the specification asks,
also from ``prompts/get`` (the SDK answers code 0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    GetPromptRequestParams,
    PromptReference,
    ResourceTemplateReference,
)

from lore_mcp.tools.registry import TOOLS
from stores import MAX_LIST_LIMIT

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer

MAX_COMPLETIONS = 100  # the specification's cap on values per response
COMPLETION_SCAN = 500  # newest items searched for an id prefix
# Template -> the tool whose pages list its ids.
LISTERS = {spec.completes: spec.name for spec in TOOLS if spec.completes is not None}


class Completer:
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
        if ref.uri in {t.uri_template for t in await self.server.list_resource_templates()}:
            return Completion(values=[])
        if ref.uri in {str(r.uri) for r in await self.server.list_resources()}:
            return Completion(values=[])  # a plain resource has no arguments to complete
        raise MCPError(INVALID_PARAMS, f"Unknown resource template: {ref.uri}")

    async def ids(self, lister: str, prefix: str) -> Completion:
        """Ids starting with ``prefix``, via tool ``lister`` so the caller's key scopes them (remote too)."""
        prefix = prefix.strip().upper()  # ULIDs are upper case
        found: list[str] = []
        cursor: str | None = None
        scanned = 0
        while scanned < COMPLETION_SCAN:
            page = await self._page(lister, cursor)
            if page is None:
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

    async def _page(self, lister: str, cursor: str | None) -> Mapping[str, Any] | None:
        """One page of ``lister``; None when it is not served here (LORE_TOOLS) or failed."""
        arguments: dict[str, Any] = {"limit": MAX_LIST_LIMIT}
        if cursor is not None:
            arguments["cursor"] = cursor
        try:
            result = await self.server.call_tool(lister, arguments)
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
