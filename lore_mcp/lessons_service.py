"""Lesson operations as the MCP tools see them: validate, redact, embed, store.

The order matters: arguments are checked first (bad input changes nothing),
then every text field is redacted, and only the redacted text is embedded and
handed to the store. Store calls are blocking, so they run on worker threads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from lore_mcp.auth import current_caller
from lore_mcp.embedding import Embedder
from lore_mcp.errors import InvalidArgument
from lore_mcp.models import (
    CompactLesson,
    CompactRecalledLesson,
    DeleteResult,
    LessonOut,
    ListResult,
    RecalledLesson,
    RecallResult,
    SaveLessonResult,
    UpdateLessonResult,
    VoteResult,
)
from lore_mcp.redaction import redact_many
from stores.lessons import (
    MAX_SHORT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    LessonDraft,
    LessonPatch,
    LessonStore,
    RecallQuery,
    Scope,
    ScoredLesson,
)

T = TypeVar("T")

PROJECT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ULID_PATTERN = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
MAX_TTL_DAYS = 36_500
LOCAL_ORG = "local"


def embedding_text(problem: str, resolution: str) -> str:
    """What a lesson's vector is computed from."""
    return f"{problem}\n{resolution}"


class LessonService:
    """The lessons tools' logic, independent of the transport."""

    def __init__(self, store: LessonStore, embedder: Embedder, *, default_project: str, org: str = LOCAL_ORG):
        self.store = store
        self.embedder = embedder
        self.default_project = check_project(default_project)
        self.org = org

    def scope(self, project: str | None) -> Scope:
        """Org and project of a call: the API key's over HTTP, the server's own over stdio."""
        requested = check_project(project) if project is not None else None
        caller = current_caller.get()
        if caller is None:
            return Scope(org=self.org, project=requested or self.default_project)
        return Scope(
            org=caller.org, project=caller.project_for(requested, self.default_project), actor=caller.actor
        )

    async def save(
        self,
        *,
        problem: str,
        resolution: str,
        context: str | None = None,
        tags: Sequence[str] = (),
        confidence: float = 0.5,
        source: str | None = None,
        project: str | None = None,
        ttl_days: float | None = None,
    ) -> SaveLessonResult:
        scope = self.scope(project)
        draft, kinds = self.make_draft(
            problem=problem,
            resolution=resolution,
            context=context,
            tags=tags,
            confidence=confidence,
            source=source,
            ttl_days=ttl_days,
        )
        [vector] = await self.embedder.aencode_documents([embedding_text(draft.problem, draft.resolution)])
        result = await _run(self.store.save, scope, draft, vector)
        return SaveLessonResult(id=result.id, merged=result.merged, redacted=list(kinds))

    def make_draft(
        self,
        *,
        problem: str,
        resolution: str,
        context: str | None = None,
        tags: Sequence[str] = (),
        confidence: float = 0.5,
        source: str | None = None,
        ttl_days: float | None = None,
        meta: dict[str, Any] | None = None,
    ) -> tuple[LessonDraft, tuple[str, ...]]:
        """Validate and redact one lesson; shared by the tool and bulk loading."""
        problem = check_text("problem", problem, MAX_TEXT_CHARS, required=True)
        resolution = check_text("resolution", resolution, MAX_TEXT_CHARS, required=True)
        context = check_text("context", context, MAX_TEXT_CHARS)
        source = check_text("source", source, MAX_SHORT_CHARS)
        check_confidence(confidence)
        clean_tags = check_tags(tags)
        expires_at = expiry(ttl_days)
        (problem, resolution, context, source), kinds = redact_many([problem, resolution, context, source])
        redacted_tags, tag_kinds = redact_many(clean_tags)
        assert problem is not None and resolution is not None
        draft = LessonDraft(
            problem=problem,
            resolution=resolution,
            context=context or None,
            tags=tuple(t for t in redacted_tags if t),
            confidence=float(confidence),
            source=source or None,
            expires_at=expires_at,
            meta=meta or {},
        )
        return draft, tuple(sorted({*kinds, *tag_kinds}))

    async def recall(
        self,
        *,
        query: str,
        tags: Sequence[str] = (),
        project: str | None = None,
        limit: int = 5,
        min_confidence: float = 0.0,
        verbose: bool = False,
    ) -> RecallResult:
        scope = self.scope(project)
        text = check_text("query", query, MAX_TEXT_CHARS, required=True)
        assert text is not None
        check_confidence(min_confidence, name="min_confidence")
        clean_tags = check_tags(tags)
        # The query is redacted too: a secret pasted into a query must not reach the model or logs.
        (text,), _ = redact_many([text])
        assert text is not None
        hits = await self._recall_while_embedding(
            scope, text, tags=clean_tags, min_confidence=min_confidence, limit=limit
        )
        if verbose:
            return RecallResult(
                lessons=[RecalledLesson(**LessonOut.of(h.lesson).model_dump(), score=h.score) for h in hits]
            )
        return RecallResult(
            lessons=[
                CompactRecalledLesson(**CompactLesson.of(h.lesson).model_dump(), score=h.score) for h in hits
            ]
        )

    async def _recall_while_embedding(self, scope: Scope, text: str, **query: Any) -> list[ScoredLesson]:
        """The store's recall, started while the query is still being embedded.

        Stores search words before they ask for the vector (``RecallQuery``), so the
        full-text half of a recall costs no time of its own: on Postgres it runs in
        the database while the model runs here.
        """
        vector: Future[Any] = Future()

        async def embed() -> None:
            try:
                vector.set_result(await self.embedder.aencode_query(text))
            except Exception as exc:  # the store raises it where it waits for the vector
                vector.set_exception(exc)
            finally:
                if not vector.done():  # cancelled: the store thread must not wait for ever
                    vector.set_exception(anyio.get_cancelled_exc_class()())

        outcome: list[Any] = []

        async def search() -> None:
            try:
                outcome.append(
                    await _run(
                        self.store.recall, scope, RecallQuery(text=text, vector=vector.result, **query)
                    )
                )
            except Exception as exc:  # re-raised below, outside the task group's ExceptionGroup
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(embed)
            tg.start_soon(search)
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    async def get(self, lesson_id: str, project: str | None = None) -> LessonOut:
        return LessonOut.of(await _run(self.store.get, self.scope(project), check_id(lesson_id)))

    async def vote(self, lesson_id: str, *, up: bool, project: str | None = None) -> VoteResult:
        lesson = await _run(self.store.vote, self.scope(project), check_id(lesson_id), up)
        return VoteResult(id=lesson.id, upvotes=lesson.upvotes, downvotes=lesson.downvotes)

    async def delete(self, lesson_id: str, project: str | None = None) -> DeleteResult:
        lesson = await _run(self.store.delete, self.scope(project), check_id(lesson_id))
        return DeleteResult(id=lesson.id, deleted=True)

    async def list(
        self,
        *,
        project: str | None = None,
        tags: Sequence[str] = (),
        limit: int = 20,
        cursor: str | None = None,
        verbose: bool = False,
    ) -> ListResult:
        scope = self.scope(project)
        if cursor is not None and not ULID_PATTERN.match(cursor):
            raise InvalidArgument(
                "cursor is not one this server returned; pass next_cursor from a previous page."
            )
        page = await _run(self.store.list, scope, check_tags(tags), limit, cursor)
        shape = LessonOut if verbose else CompactLesson
        return ListResult(lessons=[shape.of(x) for x in page.lessons], next_cursor=page.next_cursor)

    async def update(
        self,
        lesson_id: str,
        *,
        project: str | None = None,
        problem: str | None = None,
        resolution: str | None = None,
        context: str | None = None,
        tags: Sequence[str] | None = None,
        confidence: float | None = None,
        source: str | None = None,
        ttl_days: float | None = None,
    ) -> UpdateLessonResult:
        scope = self.scope(project)
        lesson_id = check_id(lesson_id)
        if problem is not None:
            check_text("problem", problem, MAX_TEXT_CHARS, required=True)
        if resolution is not None:
            check_text("resolution", resolution, MAX_TEXT_CHARS, required=True)
        check_text("context", context, MAX_TEXT_CHARS)
        check_text("source", source, MAX_SHORT_CHARS)
        if confidence is not None:
            check_confidence(confidence)
        clean_tags = check_tags(tags) if tags is not None else None
        expires_at = expiry(ttl_days)
        if all(v is None for v in (problem, resolution, context, tags, confidence, source, ttl_days)):
            raise InvalidArgument("Nothing to update: pass at least one field to change.")
        (problem, resolution, context, source), kinds = redact_many([problem, resolution, context, source])
        tag_kinds: tuple[str, ...] = ()
        if clean_tags is not None:
            redacted_tags, tag_kinds = redact_many(clean_tags)
            clean_tags = tuple(t for t in redacted_tags if t)
        # An empty string clears an optional field.
        clear = frozenset(name for name, value in (("context", context), ("source", source)) if value == "")
        patch = LessonPatch(
            problem=problem,
            resolution=resolution,
            context=context or None,
            tags=clean_tags,
            confidence=confidence,
            source=source or None,
            expires_at=expires_at,
            clear=clear,
        )
        vector = None
        if problem is not None or resolution is not None:
            current = await _run(self.store.get, scope, lesson_id)
            text = embedding_text(problem or current.problem, resolution or current.resolution)
            [vector] = await self.embedder.aencode_documents([text])
        lesson = await _run(self.store.update, scope, lesson_id, patch, vector)
        return UpdateLessonResult(**LessonOut.of(lesson).model_dump(), redacted=sorted({*kinds, *tag_kinds}))


async def _run(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(fn, *args)


def check_project(project: str) -> str:
    if not PROJECT_PATTERN.match(project):
        raise InvalidArgument(
            f"project {project[:80]!r} is not a valid name: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    return project


def check_id(lesson_id: str) -> str:
    if not ULID_PATTERN.match(lesson_id):
        raise InvalidArgument(
            f"id {lesson_id[:80]!r} is not a lesson id: ids are 26-character ULIDs as returned by save_lesson."
        )
    return lesson_id


def check_text(name: str, value: str | None, max_chars: int, *, required: bool = False) -> str | None:
    """Reject empty required text, over-long text and text that is not valid Unicode."""
    if value is None:
        if required:
            raise InvalidArgument(f"{name} is required.")
        return None
    if required and not value.strip():
        raise InvalidArgument(f"{name} must not be empty or only whitespace.")
    if len(value) > max_chars:
        raise InvalidArgument(f"{name} is {len(value)} characters; the limit is {max_chars}. Shorten it.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"{name} contains invalid Unicode (a lone surrogate); send valid UTF-8 text."
        ) from None
    return value


def check_confidence(value: float, *, name: str = "confidence") -> None:
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{name} must be between 0 and 1, not {value}.")


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """Tags are trimmed, lower-cased and de-duplicated; empty or over-long ones are refused."""
    if isinstance(tags, str):
        raise InvalidArgument("tags must be a list of strings, not one string.")
    if len(tags) > MAX_TAGS:
        raise InvalidArgument(f"At most {MAX_TAGS} tags are allowed; got {len(tags)}.")
    clean: dict[str, None] = {}
    for tag in tags:
        text = check_text("tag", tag, MAX_TAG_CHARS, required=True)
        assert text is not None
        clean.setdefault(text.strip().lower(), None)
    return tuple(clean)


def expiry(ttl_days: float | None) -> datetime | None:
    if ttl_days is None:
        return None
    if not 0 < ttl_days <= MAX_TTL_DAYS:
        raise InvalidArgument(f"ttl_days must be more than 0 and at most {MAX_TTL_DAYS}, not {ttl_days}.")
    return datetime.now(UTC) + timedelta(days=ttl_days)
