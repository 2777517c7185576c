"""Curating memory (tools too, since agents tidy): near-duplicates, pairs kept apart (stored for
every curator), and merges, one ``merge`` commit keeping both lessons' votes."""

from __future__ import annotations

from typing import Literal

import anyio.to_thread
from pydantic import BaseModel, Field

from lore_mcp.errors import InvalidArgument
from lore_mcp.services.lesson_input import check_id, make_patch
from lore_mcp.services.lessons import OnLessons, embedding_text
from lore_mcp.services.models import LessonOut
from lore_mcp.services.recording import NO_KEY, Who, failures_recorded
from stores import Lesson, LessonPatch, restates

# find_duplicates' default cosine: restatements score 0.8-0.95 with all-MiniLM-L6-v2, same-topic
# different lessons 0.5-0.75 (README, "A page for people").
DEFAULT_THRESHOLD = 0.8
MAX_PAIRS_PAGE = 50
How = Literal["kept", "other", "both"]


class DuplicatePair(BaseModel):
    a: LessonOut
    b: LessonOut
    similarity: float = Field(description="Cosine similarity of the two lessons' vectors (1 is the same).")


class DuplicatesResult(BaseModel):
    project: str
    threshold: float
    total: int = Field(description="Pairs from the threshold up, on every page.")
    pairs: list[DuplicatePair] = Field(description="Most similar first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class MergeResult(BaseModel):
    lesson: LessonOut = Field(description="The kept lesson as merged (as it would be, with dry_run).")
    merged_from: str = Field(description="The other lesson's id: deleted by the merge.")
    combined: dict[str, How] = Field(
        description="How each text field was chosen: `kept` (the kept lesson's says it all), `other` "
        "(the other's says more), `both` (each adds something: joined, kept lesson's first)."
    )
    dry_run: bool
    redacted: list[str] = Field(default_factory=list)


def combine(keep: Lesson, other: Lesson) -> tuple[dict[str, str | None], dict[str, How]]:
    """Merged text fields and how: a restated field (``dedup.restates``) takes the other's, two
    that each add are joined (a problem keeps the kept lesson's, title-like)."""
    fields: dict[str, str | None] = {}
    how: dict[str, How] = {}
    for name in ("problem", "resolution", "context"):
        mine, theirs = getattr(keep, name), getattr(other, name)
        if not theirs or restates(theirs, mine):
            fields[name], how[name] = mine, "kept"
        elif not mine or restates(mine, theirs):
            fields[name], how[name] = theirs, "other"
        elif name == "problem":
            fields[name], how[name] = mine, "kept"
        else:
            fields[name], how[name] = f"{mine}\n\n{theirs}", "both"
    return fields, how


class CurationService(OnLessons):
    """``find_duplicates``, ``keep_both`` and ``merge_lessons`` over the lessons' store."""

    async def duplicates(
        self, threshold: float, limit: int, cursor: str | None, project: str | None, *, who: Who = NO_KEY
    ) -> DuplicatesResult:
        scope = self.lessons.scope(project, who.caller)
        if not 0 <= threshold <= 1:
            raise InvalidArgument("threshold must be a cosine similarity between 0 and 1.")
        if not 1 <= limit <= MAX_PAIRS_PAGE:
            raise InvalidArgument(f"limit must be between 1 and {MAX_PAIRS_PAGE}.")
        if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) < 10):
            raise InvalidArgument("cursor must be the next_cursor of a previous page.")
        pairs = await anyio.to_thread.run_sync(self.store.duplicate_pairs, scope, threshold)
        start = int(cursor or 0)
        page = pairs[start : start + limit]
        found = await anyio.to_thread.run_sync(
            lambda: {i: self.store.get(scope, i) for pair in page for i in pair[:2]}
        )
        return DuplicatesResult(
            project=scope.project,
            threshold=threshold,
            total=len(pairs),
            pairs=[
                DuplicatePair(a=LessonOut.of(found[a]), b=LessonOut.of(found[b]), similarity=round(s, 6))
                for a, b, s in page
            ],
            next_cursor=str(start + limit) if start + limit < len(pairs) else None,
        )

    async def keep_both(
        self, a: str, b: str, project: str | None = None, *, who: Who = NO_KEY
    ) -> dict[str, object]:
        scope = self.lessons.scope(project, who.caller)
        a, b = check_id(a), check_id(b)
        if a == b:
            raise InvalidArgument("keep_both takes two different lessons.")
        await anyio.to_thread.run_sync(self.store.keep_pair, scope, a, b)
        return {"kept": sorted((a, b))}

    async def merge(
        self,
        keep: str,
        other: str,
        *,
        dry_run: bool = False,
        project: str | None = None,
        who: Who = NO_KEY,
        **given: str | None,
    ) -> MergeResult:
        """``merge_lessons``; ``given`` are the texts (problem, resolution, context) to use instead."""
        scope, recorded = self.lessons.scope(project, who.caller), who.note("merge")
        async with failures_recorded(self.store, scope, recorded):
            keep, other = check_id(keep), check_id(other)
            if keep == other:
                raise InvalidArgument("merge_lessons takes two different lessons.")
            kept = await anyio.to_thread.run_sync(self.store.get, scope, keep)
            gone = await anyio.to_thread.run_sync(self.store.get, scope, other)
            patch, preview, how, kinds = merged(kept, gone, given)
            shown = MergeResult(
                lesson=preview, merged_from=other, combined=how, dry_run=dry_run, redacted=kinds
            )
            if dry_run:
                return shown
            vector = None
            if (preview.problem, preview.resolution) != (kept.problem, kept.resolution):
                await self.lessons._require_model()
                [vector] = await self.lessons.embedder.aencode_documents(
                    [embedding_text(preview.problem, preview.resolution)]
                )
            lesson = await anyio.to_thread.run_sync(
                lambda: self.store.merge_lessons(scope, keep, other, patch, vector, activity=recorded)
            )
        return shown.model_copy(update={"lesson": LessonOut.of(lesson)})


def merged(
    kept: Lesson, gone: Lesson, given: dict[str, str | None]
) -> tuple[LessonPatch, LessonOut, dict[str, How], list[str]]:
    """The kept lesson's patch: ``combine``d texts, both tags and votes, the higher confidence."""
    fields, how = combine(kept, gone)
    fields.update({k: v for k, v in given.items() if v is not None})
    patch, kinds = make_patch(
        **fields,
        tags=list(dict.fromkeys((*kept.tags, *gone.tags))),
        confidence=max(kept.confidence, gone.confidence),
        source=kept.source or gone.source,
        ttl_days=None,
    )
    texts = {
        k: getattr(patch, k) for k in ("problem", "resolution", "context") if getattr(patch, k) is not None
    }
    votes = {"upvotes": kept.upvotes + gone.upvotes, "downvotes": kept.downvotes + gone.downvotes}
    preview = LessonOut.of(kept).model_copy(
        update={**texts, **votes, "tags": list(patch.tags or ()), "confidence": patch.confidence}
    )
    return patch, preview, how, kinds
