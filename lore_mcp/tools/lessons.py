"""The lesson tools: save, recall, vote on, read, correct, delete and list lessons.

Each tool validates its typed arguments (the SDK publishes them as the input schema)
and hands them to a ``LessonsBackend``: ``LessonService`` on a server with a store,
the team server in remote mode.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Protocol

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from lore_mcp.auth import Caller, current_caller
from lore_mcp.services.models import (
    DeleteResult,
    LessonOut,
    ListResult,
    RecallResult,
    SaveLessonResult,
    UpdateLessonResult,
    VoteResult,
)
from lore_mcp.tools.arguments import Confidence, Cursor, LessonId, Project, Short, Tags, Text
from lore_mcp.tools.registry import tools_of
from stores.engine.lessons import MAX_LIST_LIMIT, MAX_RECALL_LIMIT


class LessonsBackend(Protocol):
    """What the lesson tools need answered (``LessonService`` has the same methods)."""

    async def save(
        self,
        *,
        problem: str,
        resolution: str,
        context: str | None,
        tags: Sequence[str],
        confidence: float,
        source: str | None,
        project: str | None,
        ttl_days: float | None,
        caller: Caller | None = None,
    ) -> SaveLessonResult: ...

    async def recall(
        self,
        *,
        query: str,
        tags: Sequence[str],
        project: str | None,
        limit: int,
        min_confidence: float,
        verbose: bool,
        caller: Caller | None = None,
    ) -> RecallResult: ...

    async def vote(
        self, lesson_id: str, *, up: bool, project: str | None, caller: Caller | None = None
    ) -> VoteResult: ...

    async def get(
        self, lesson_id: str, project: str | None = None, *, caller: Caller | None = None
    ) -> LessonOut: ...

    async def update(
        self,
        lesson_id: str,
        *,
        project: str | None,
        problem: str | None,
        resolution: str | None,
        context: str | None,
        tags: Sequence[str] | None,
        confidence: float | None,
        source: str | None,
        ttl_days: float | None,
        caller: Caller | None = None,
    ) -> UpdateLessonResult: ...

    async def delete(
        self, lesson_id: str, project: str | None, *, caller: Caller | None = None
    ) -> DeleteResult: ...

    async def list(
        self,
        *,
        project: str | None,
        tags: Sequence[str],
        limit: int,
        cursor: str | None,
        verbose: bool,
        caller: Caller | None = None,
    ) -> ListResult: ...


def tools_for(lessons: LessonsBackend, groups: Collection[str]) -> list[Tool]:
    """The lesson tools of ``groups``, answered by ``lessons``."""
    tools = LessonTools(lessons)
    return tools_of(
        groups,
        tools.save_lesson,
        tools.recall_lessons,
        tools.upvote_lesson,
        tools.downvote_lesson,
        tools.get_lesson,
        tools.update_lesson,
        tools.delete_lesson,
        tools.list_lessons,
    )


class LessonTools:
    """The lesson tools bound to their backend; each method is one tool, its docstring the
    description agents read."""

    def __init__(self, lessons: LessonsBackend) -> None:
        self.lessons = lessons

    async def save_lesson(
        self,
        problem: Annotated[Text, Field(min_length=1, description="What went wrong or what was hard.")],
        resolution: Annotated[Text, Field(min_length=1, description="What fixed it or the answer found.")],
        context: Annotated[
            Text | None, Field(description="Where it happened: stack, versions, constraints.")
        ] = None,
        tags: Tags = [],  # noqa: B006 - the SDK copies defaults per call
        confidence: Annotated[Confidence, Field(description="How sure you are, 0..1.")] = 0.5,
        source: Annotated[
            Short | None, Field(description="Who or what taught this: agent, URL, ticket.")
        ] = None,
        project: Project = None,
        ttl_days: Annotated[
            float | None, Field(gt=0, le=36_500, description="Forget after this many days.")
        ] = None,
    ) -> SaveLessonResult:
        """Save a lesson after solving something non-obvious, so you and other agents recall it later.

        Secrets in the text are redacted before storing. A lesson that adds nothing to one already stored
        in the project (the same text, or a shorter restatement of each field with its words, numbers and
        names in the same order) merges into it (merged=true);
        anything else is kept as a new lesson, and its near neighbours come back in `similar` so you can
        update_lesson or delete_lesson one that says the same thing.
        """
        return await self.lessons.save(
            problem=problem,
            resolution=resolution,
            context=context,
            tags=tags,
            confidence=confidence,
            source=source,
            project=project,
            ttl_days=ttl_days,
            caller=current_caller.get(),
        )

    async def recall_lessons(
        self,
        query: Annotated[Text, Field(min_length=1, description="Describe the problem or task at hand.")],
        tags: Annotated[Tags, Field(description="Only lessons carrying all of these tags.")] = [],  # noqa: B006
        project: Project = None,
        limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
        min_confidence: Annotated[
            Confidence, Field(description="Skip lessons less certain than this.")
        ] = 0.0,
        verbose: Annotated[bool, Field(description="Full records (source, times, meta).")] = False,
    ) -> RecallResult:
        """Recall lessons relevant to a problem, best first. Call this before starting a task that
        may have been solved before. Matches by meaning and by words; fresher, more confident and
        upvoted lessons rank higher."""
        return await self.lessons.recall(
            query=query,
            tags=tags,
            project=project,
            limit=limit,
            min_confidence=min_confidence,
            verbose=verbose,
            caller=current_caller.get(),
        )

    async def upvote_lesson(self, id: LessonId, project: Project = None) -> VoteResult:
        """Upvote a lesson that helped, so it ranks higher for everyone."""
        return await self.lessons.vote(id, up=True, project=project, caller=current_caller.get())

    async def downvote_lesson(self, id: LessonId, project: Project = None) -> VoteResult:
        """Downvote a lesson that was wrong or stale, so it sinks."""
        return await self.lessons.vote(id, up=False, project=project, caller=current_caller.get())

    async def get_lesson(self, id: LessonId, project: Project = None) -> LessonOut:
        """Read one lesson in full by id."""
        return await self.lessons.get(id, project, caller=current_caller.get())

    async def update_lesson(
        self,
        id: LessonId,
        project: Project = None,
        problem: Annotated[Text | None, Field(min_length=1)] = None,
        resolution: Annotated[Text | None, Field(min_length=1)] = None,
        context: Annotated[Text | None, Field(description="Empty string clears it.")] = None,
        tags: Annotated[Tags | None, Field(description="Replaces all tags.")] = None,
        confidence: Confidence | None = None,
        source: Annotated[Short | None, Field(description="Empty string clears it.")] = None,
        ttl_days: Annotated[
            float | None, Field(gt=0, le=36_500, description="Expire this many days from now.")
        ] = None,
    ) -> UpdateLessonResult:
        """Correct or refine a lesson; only the fields you pass change."""
        return await self.lessons.update(
            id,
            project=project,
            problem=problem,
            resolution=resolution,
            context=context,
            tags=tags,
            confidence=confidence,
            source=source,
            ttl_days=ttl_days,
            caller=current_caller.get(),
        )

    async def delete_lesson(self, id: LessonId, project: Project = None) -> DeleteResult:
        """Delete a lesson that is wrong beyond repair."""
        return await self.lessons.delete(id, project, caller=current_caller.get())

    async def list_lessons(
        self,
        project: Project = None,
        tags: Annotated[Tags, Field(description="Only lessons carrying all of these tags.")] = [],  # noqa: B006
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 20,
        cursor: Cursor = None,
        verbose: Annotated[bool, Field(description="Full records (source, times, meta).")] = False,
    ) -> ListResult:
        """List lessons newest first, a page at a time."""
        return await self.lessons.list(
            project=project,
            tags=tags,
            limit=limit,
            cursor=cursor,
            verbose=verbose,
            caller=current_caller.get(),
        )
