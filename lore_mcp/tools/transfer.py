"""export_lessons / import_lessons: moving lessons between Lore servers through MCP."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Protocol

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from lore_mcp.auth import Caller, current_caller
from lore_mcp.services.transfer import MAX_IMPORT_BATCH, ExportPage, ImportResult, LessonIn
from lore_mcp.tools.arguments import Cursor, Project
from lore_mcp.tools.registry import tools_of
from stores.engine.lessons import MAX_LIST_LIMIT


class TransferBackend(Protocol):
    """What the transfer tools need answered (``lore_mcp.services.transfer.Transfer`` has the same methods)."""

    async def export_page(
        self, project: str | None, cursor: str | None, limit: int, *, caller: Caller | None = None
    ) -> ExportPage: ...

    async def import_batch(
        self, items: Sequence[LessonIn], project: str | None, *, caller: Caller | None = None
    ) -> ImportResult: ...


def tools_for(transfer: TransferBackend, groups: Collection[str]) -> list[Tool]:
    """The transfer tools of ``groups``, answered by ``transfer``."""
    tools = TransferTools(transfer)
    return tools_of(groups, tools.export_lessons, tools.import_lessons)


class TransferTools:
    """The transfer tools bound to their backend."""

    def __init__(self, transfer: TransferBackend) -> None:
        self.transfer = transfer

    async def export_lessons(
        self,
        project: Project = None,
        cursor: Cursor = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 100,
    ) -> ExportPage:
        """Export a project's lessons in full, a page at a time, for import_lessons elsewhere."""
        return await self.transfer.export_page(project, cursor, limit, caller=current_caller.get())

    async def import_lessons(
        self,
        lessons: Annotated[list[LessonIn], Field(min_length=1, max_length=MAX_IMPORT_BATCH)],
        project: Project = None,
    ) -> ImportResult:
        """Import lessons (as export_lessons returns them) into a project, keeping their ids: an id
        already stored is skipped, so importing twice adds nothing. Secrets are redacted first."""
        return await self.transfer.import_batch(lessons, project, caller=current_caller.get())
