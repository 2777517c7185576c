"""The curation tools, group ``curation``: off by default; ``lore-memory ui`` serves it."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.services.curation import DEFAULT_THRESHOLD, MAX_PAIRS_PAGE, DuplicatesResult, MergeResult
from lore_mcp.tools.context import LessonId, Project, Text, call_of

MergedProblem = Annotated[Text | None, Field(description="The merged problem, instead of the combined one.")]
MergedResolution = Annotated[
    Text | None, Field(description="The merged resolution, instead of the combined one.")
]
MergedContext = Annotated[Text | None, Field(description="The merged context, instead of the combined one.")]


async def find_duplicates(
    ctx: Context,
    threshold: Annotated[
        float,
        Field(ge=0, le=1, description="Cosine similarity from which a pair is listed (1 is the same text)."),
    ] = DEFAULT_THRESHOLD,
    limit: Annotated[int, Field(ge=1, le=MAX_PAIRS_PAGE)] = 20,
    cursor: Annotated[
        str | None, Field(max_length=12, description="next_cursor of the previous page.")
    ] = None,
    project: Project = None,
) -> DuplicatesResult:
    """Pairs of this project's lessons that say nearly the same, most similar first, across every
    lesson (not only the newest): candidates to merge_lessons or keep_both. Pairs kept with
    keep_both are not listed."""
    call = call_of(ctx)
    return await call.services.curation.duplicates(threshold, limit, cursor, project, who=call.who)


async def keep_both(ctx: Context, a: LessonId, b: LessonId, project: Project = None) -> dict[str, Any]:
    """Mark two lessons find_duplicates listed as different lessons: the pair is not listed again,
    to anyone."""
    call = call_of(ctx)
    return await call.services.curation.keep_both(a, b, project, who=call.who)


async def merge_lessons(
    ctx: Context,
    keep: Annotated[LessonId, Field(description="The lesson that stays.")],
    other: Annotated[LessonId, Field(description="The lesson folded into it and deleted.")],
    problem: MergedProblem = None,
    resolution: MergedResolution = None,
    context: MergedContext = None,
    dry_run: Annotated[bool, Field(description="Only show the merged lesson; write nothing.")] = False,
    project: Project = None,
) -> MergeResult:
    """Merge two lessons that say the same into one commit: `keep` takes both lessons' votes
    (summed), their tags, the higher confidence and the combined text; `other` is deleted.
    `combined` says how each text field was chosen. Revert the merge commit to undo it."""
    call = call_of(ctx)
    return await call.services.curation.merge(
        keep,
        other,
        problem=problem,
        resolution=resolution,
        context=context,
        dry_run=dry_run,
        project=project,
        who=call.who,
    )
