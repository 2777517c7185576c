"""schema / plan / apply / query_rows: the tables agents design for themselves."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.services.plan_models import PlanModel, RowFilter
from lore_mcp.tools.context import OrderBy, Project, call_of, progress_of


async def schema(ctx: Context, project: Project = None) -> dict[str, Any]:
    """Read this project's tables (columns, row counts) and its schema_hash. Call it before
    writing a plan: a plan carries the schema_hash it was made against."""
    call = call_of(ctx)
    return await call.services.tables.schema(project, who=call.who)


async def plan(ctx: Context, plan: PlanModel, project: Project = None) -> dict[str, Any]:
    """Dry-run a plan: returns ok, a risk level (low / medium / high), the predicted row and schema
    effects, and errors naming the failing operation. Changes nothing."""
    call = call_of(ctx)
    return await call.services.tables.plan(plan, project, who=call.who)


async def apply(ctx: Context, plan: PlanModel, project: Project = None) -> dict[str, Any]:
    """Apply a plan to this project's tables, all operations or none, and record it as a commit.
    A plan made against an older schema is refused with STALE_PLAN: read schema and plan again."""
    call = call_of(ctx)
    return await call.services.tables.apply(plan, project, who=call.who, report=progress_of(ctx, "rows"))


async def query_rows(
    ctx: Context,
    table: Annotated[str, Field(max_length=64)],
    where: Annotated[list[RowFilter], Field(max_length=50, description="ANDed filters.")] = [],  # noqa: B006
    order_by: Annotated[list[OrderBy], Field(max_length=10)] = [],  # noqa: B006
    limit: Annotated[int, Field(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Field(max_length=4000)] = None,
    project: Project = None,
) -> dict[str, Any]:
    """Read rows of one of this project's tables, filtered and ordered (by id by default)."""
    call = call_of(ctx)
    return await call.services.tables.query_rows(
        table,
        where=[w.model_dump() for w in where],
        order_by=[o.model_dump() for o in order_by],
        limit=limit,
        cursor=cursor,
        project=project,
        who=call.who,
    )
