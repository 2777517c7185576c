"""export_lessons / import_lessons: moving lessons between Lore servers through MCP."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.services.transfer import MAX_IMPORT_BATCH, ExportPage, ImportResult, LessonIn
from lore_mcp.tools.context import Cursor, Project, call_of, progress_of
from stores import MAX_LIST_LIMIT


async def export_lessons(
    ctx: Context,
    project: Project = None,
    cursor: Cursor = None,
    limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 100,
) -> ExportPage:
    """Export a project's lessons in full, a page at a time, for import_lessons elsewhere."""
    call = call_of(ctx)
    return await call.services.transfer.export_page(project, cursor, limit, who=call.who)


async def import_lessons(
    ctx: Context,
    lessons: Annotated[list[LessonIn], Field(min_length=1, max_length=MAX_IMPORT_BATCH)],
    project: Project = None,
) -> ImportResult:
    """Import lessons (as export_lessons returns them) into a project, keeping their ids: an id
    already stored is skipped, so importing twice adds nothing. Secrets are redacted first."""
    call = call_of(ctx)
    report = progress_of(ctx, "lessons")
    return await call.services.transfer.import_batch(lessons, project, who=call.who, report=report)
