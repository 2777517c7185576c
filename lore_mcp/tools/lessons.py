"""The lesson tools; each signature is its input schema, each docstring its description."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.services.models import (
    DeleteResult,
    LessonOut,
    ListResult,
    RecallResult,
    SaveLessonResult,
    UpdateLessonResult,
    VoteResult,
)
from lore_mcp.tools.context import Confidence, Cursor, Days, LessonId, Project, Short, Tags, Text, call_of
from stores import MAX_LIST_LIMIT, MAX_RECALL_LIMIT


async def save_lesson(
    ctx: Context,
    problem: Annotated[Text, Field(min_length=1, description="What went wrong or what was hard.")],
    resolution: Annotated[Text, Field(min_length=1, description="What fixed it or the answer found.")],
    context: Annotated[
        Text | None, Field(description="Where it happened: stack, versions, constraints.")
    ] = None,
    tags: Tags = [],  # noqa: B006 - the SDK copies defaults per call
    confidence: Annotated[Confidence, Field(description="How sure you are, 0..1.")] = 0.5,
    source: Annotated[Short | None, Field(description="Who or what taught this: agent, URL, ticket.")] = None,
    project: Project = None,
    ttl_days: Annotated[Days | None, Field(description="Forget after this many days.")] = None,
) -> SaveLessonResult:
    """Save a lesson after solving something non-obvious, so you and other agents recall it later.

    Secrets in the text are redacted before storing. A lesson that adds nothing to one already stored
    in the project (the same text, or a shorter restatement of each field with its words, numbers and
    names in the same order) merges into it (merged=true);
    anything else is kept as a new lesson, and its near neighbours come back in `similar` so you can
    update_lesson or delete_lesson one that says the same thing.
    """
    call = call_of(ctx)
    return await call.services.lessons.save(
        problem=problem,
        resolution=resolution,
        context=context,
        tags=tags,
        confidence=confidence,
        source=source,
        project=project,
        ttl_days=ttl_days,
        who=call.who,
    )


async def recall_lessons(
    ctx: Context,
    query: Annotated[Text, Field(min_length=1, description="Describe the problem or task at hand.")],
    tags: Annotated[Tags, Field(description="Only lessons carrying all of these tags.")] = [],  # noqa: B006
    project: Project = None,
    limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
    min_confidence: Annotated[Confidence, Field(description="Skip lessons less certain than this.")] = 0.0,
    verbose: Annotated[bool, Field(description="Full records (source, times, meta).")] = False,
) -> RecallResult:
    """Recall lessons relevant to a problem, best first. Call this before starting a task that
    may have been solved before. Matches by meaning and by words; fresher, more confident and
    upvoted lessons rank higher."""
    call = call_of(ctx)
    return await call.services.lessons.recall(
        query=query,
        tags=tags,
        project=project,
        limit=limit,
        min_confidence=min_confidence,
        verbose=verbose,
        who=call.who,
    )


async def upvote_lesson(ctx: Context, id: LessonId, project: Project = None) -> VoteResult:
    """Upvote a lesson that helped, so it ranks higher for everyone."""
    call = call_of(ctx)
    return await call.services.lessons.vote(id, up=True, project=project, who=call.who)


async def downvote_lesson(ctx: Context, id: LessonId, project: Project = None) -> VoteResult:
    """Downvote a lesson that was wrong or stale, so it sinks."""
    call = call_of(ctx)
    return await call.services.lessons.vote(id, up=False, project=project, who=call.who)


async def get_lesson(ctx: Context, id: LessonId, project: Project = None) -> LessonOut:
    """Read one lesson in full by id."""
    call = call_of(ctx)
    return await call.services.lessons.get(id, project, who=call.who)


async def update_lesson(
    ctx: Context,
    id: LessonId,
    project: Project = None,
    problem: Annotated[Text | None, Field(min_length=1)] = None,
    resolution: Annotated[Text | None, Field(min_length=1)] = None,
    context: Annotated[Text | None, Field(description="Empty string clears it.")] = None,
    tags: Annotated[Tags | None, Field(description="Replaces all tags.")] = None,
    confidence: Confidence | None = None,
    source: Annotated[Short | None, Field(description="Empty string clears it.")] = None,
    ttl_days: Annotated[Days | None, Field(description="Expire this many days from now.")] = None,
) -> UpdateLessonResult:
    """Correct or refine a lesson; only the fields you pass change."""
    call = call_of(ctx)
    return await call.services.lessons.update(
        id,
        project=project,
        problem=problem,
        resolution=resolution,
        context=context,
        tags=tags,
        confidence=confidence,
        source=source,
        ttl_days=ttl_days,
        who=call.who,
    )


async def delete_lesson(ctx: Context, id: LessonId, project: Project = None) -> DeleteResult:
    """Delete a lesson that is wrong beyond repair."""
    call = call_of(ctx)
    return await call.services.lessons.delete(id, project, who=call.who)


async def list_lessons(
    ctx: Context,
    project: Project = None,
    tags: Annotated[Tags, Field(description="Only lessons carrying all of these tags.")] = [],  # noqa: B006
    limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 20,
    cursor: Cursor = None,
    verbose: Annotated[bool, Field(description="Full records (source, times, meta).")] = False,
) -> ListResult:
    """List lessons newest first, a page at a time."""
    call = call_of(ctx)
    return await call.services.lessons.list(
        project=project, tags=tags, limit=limit, cursor=cursor, verbose=verbose, who=call.who
    )
