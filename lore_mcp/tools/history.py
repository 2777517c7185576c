"""history / get_commit / revert_commit: every change is a commit that can be read and undone."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.tools.context import Project, call_of

CommitId = Annotated[str, Field(max_length=64)]


async def history(
    ctx: Context,
    target: Annotated[
        str | None, Field(max_length=64, description="A lesson id or a table name; omit for everything.")
    ] = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Field(max_length=20)] = None,
    project: Project = None,
    effects: Annotated[
        bool, Field(description="Each commit in full, as get_commit shows it (limit at most 20).")
    ] = False,
) -> dict[str, Any]:
    """List this project's commits newest first: every lesson change, apply and revert."""
    call = call_of(ctx)
    return await call.services.tables.history(target, limit, cursor, project, effects=effects, who=call.who)


async def get_commit(ctx: Context, commit_id: CommitId, project: Project = None) -> dict[str, Any]:
    """One commit in full: its rows before and after, and its schema changes."""
    call = call_of(ctx)
    return await call.services.tables.get_commit(commit_id, project, who=call.who)


async def revert_commit(ctx: Context, commit_id: CommitId, project: Project = None) -> dict[str, Any]:
    """Undo a commit with a new commit. Refused with CONFLICT (naming them) when later commits
    changed the same rows or tables; revert those first."""
    call = call_of(ctx)
    return await call.services.tables.revert_commit(commit_id, project, who=call.who)
