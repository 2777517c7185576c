"""schema / plan / apply / query_rows: the tables agents design for themselves."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from lore_mcp.auth import Caller, current_caller
from lore_mcp.services.plan_models import PlanModel, RowFilter
from lore_mcp.tools.arguments import OrderBy, Project
from lore_mcp.tools.registry import tools_of


class TablesBackend(Protocol):
    """What the structured tools need answered (``StructuredService`` has the same methods)."""

    async def schema(self, project: str | None = None, *, caller: Caller | None = None) -> dict[str, Any]: ...

    async def plan(
        self, plan: PlanModel, project: str | None = None, *, caller: Caller | None = None
    ) -> dict[str, Any]: ...

    async def apply(
        self, plan: PlanModel, project: str | None = None, *, caller: Caller | None = None
    ) -> dict[str, Any]: ...

    async def query_rows(
        self,
        table: str,
        *,
        where: list[dict[str, Any]],
        order_by: list[dict[str, Any]],
        limit: int,
        cursor: str | None,
        project: str | None = None,
        caller: Caller | None = None,
    ) -> dict[str, Any]: ...


def tools_for(tables: TablesBackend, groups: Collection[str]) -> list[Tool]:
    """The structured tools of ``groups``, answered by ``tables``."""
    tools = StructuredTools(tables)
    return tools_of(groups, tools.schema, tools.plan, tools.apply, tools.query_rows)


class StructuredTools:
    """The structured tools bound to their backend."""

    def __init__(self, tables: TablesBackend) -> None:
        self.tables = tables

    async def schema(self, project: Project = None) -> dict[str, Any]:
        """Read this project's tables (columns, row counts) and its schema_hash. Call it before
        writing a plan: a plan carries the schema_hash it was made against."""
        return await self.tables.schema(project, caller=current_caller.get())

    async def plan(self, plan: PlanModel, project: Project = None) -> dict[str, Any]:
        """Dry-run a plan: returns ok, a risk level (low / medium / high), the predicted row and schema
        effects, and errors naming the failing operation. Changes nothing."""
        return await self.tables.plan(plan, project, caller=current_caller.get())

    async def apply(self, plan: PlanModel, project: Project = None) -> dict[str, Any]:
        """Apply a plan to this project's tables, all operations or none, and record it as a commit.
        A plan made against an older schema is refused with STALE_PLAN: read schema and plan again."""
        return await self.tables.apply(plan, project, caller=current_caller.get())

    async def query_rows(
        self,
        table: Annotated[str, Field(max_length=64)],
        where: Annotated[list[RowFilter], Field(max_length=50, description="ANDed filters.")] = [],  # noqa: B006
        order_by: Annotated[list[OrderBy], Field(max_length=10)] = [],  # noqa: B006
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Field(max_length=4000)] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """Read rows of one of this project's tables, filtered and ordered (by id by default)."""
        return await self.tables.query_rows(
            table,
            where=[w.model_dump() for w in where],
            order_by=[o.model_dump() for o in order_by],
            limit=limit,
            cursor=cursor,
            project=project,
            caller=current_caller.get(),
        )
