"""history / get_commit / revert_commit: every change is a commit that can be read and undone."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from lore_mcp.auth import Caller, current_caller
from lore_mcp.tools.arguments import Project
from lore_mcp.tools.registry import tools_of


class HistoryBackend(Protocol):
    """What the history tools need answered (``StructuredService`` has the same methods)."""

    async def history(
        self,
        target: str | None,
        limit: int,
        cursor: str | None,
        project: str | None = None,
        *,
        caller: Caller | None = None,
    ) -> dict[str, Any]: ...

    async def get_commit(
        self, commit_id: str, project: str | None = None, *, caller: Caller | None = None
    ) -> dict[str, Any]: ...

    async def revert_commit(
        self, commit_id: str, project: str | None = None, *, caller: Caller | None = None
    ) -> dict[str, Any]: ...


def tools_for(commits: HistoryBackend, groups: Collection[str]) -> list[Tool]:
    """The history tools of ``groups``, answered by ``commits``."""
    tools = HistoryTools(commits)
    return tools_of(groups, tools.history, tools.get_commit, tools.revert_commit)


class HistoryTools:
    """The history tools bound to their backend."""

    def __init__(self, commits: HistoryBackend) -> None:
        self.commits = commits

    async def history(
        self,
        target: Annotated[
            str | None, Field(max_length=64, description="A lesson id or a table name; omit for everything.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, Field(max_length=20)] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """List this project's commits newest first: every lesson change, apply and revert."""
        return await self.commits.history(target, limit, cursor, project, caller=current_caller.get())

    async def get_commit(
        self, commit_id: Annotated[str, Field(max_length=64)], project: Project = None
    ) -> dict[str, Any]:
        """One commit in full: its rows before and after, and its schema changes."""
        return await self.commits.get_commit(commit_id, project, caller=current_caller.get())

    async def revert_commit(
        self, commit_id: Annotated[str, Field(max_length=64)], project: Project = None
    ) -> dict[str, Any]:
        """Undo a commit with a new commit. Refused with CONFLICT (naming them) when later commits
        changed the same rows or tables; revert those first."""
        return await self.commits.revert_commit(commit_id, project, caller=current_caller.get())
