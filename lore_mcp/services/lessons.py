"""Lesson operations: validate (bad input changes nothing), redact, embed that, store on threads (blocks)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np

from lore_mcp.auth import Caller
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.embedding.identity import ModelMismatch, mismatch_message, running_model
from lore_mcp.redaction import redact
from lore_mcp.services.lesson_input import (
    check_confidence,
    check_cursor,
    check_id,
    check_project,
    check_tags,
    check_text,
    make_draft,
    make_patch,
)
from lore_mcp.services.models import (
    CompactLesson,
    CompactRecalledLesson,
    DeleteResult,
    LessonOut,
    ListResult,
    RecalledLesson,
    RecallResult,
    SaveLessonResult,
    SimilarLesson,
    UpdateLessonResult,
    VoteResult,
)
from lore_mcp.services.recording import NO_KEY, Who, failures_recorded
from stores import (
    MAX_TEXT_CHARS,
    ActivityNote,
    EmbeddingModel,
    LessonDraft,
    ModelChangedError,
    Recalled,
    RecallQuery,
    SaveResult,
    Scope,
    ScoredLesson,
    Store,
)

T = TypeVar("T")

LOCAL_ORG = "local"


def embedding_text(problem: str, resolution: str) -> str:
    """What a lesson's vector is computed from."""
    return f"{problem}\n{resolution}"


class LessonService:
    """The lessons tools' logic, independent of the transport."""

    def __init__(self, store: Store, embedder: Embedder, *, default_project: str, org: str = LOCAL_ORG):
        self.store, self.embedder = store, embedder
        self.default_project = check_project(default_project)
        self.org = org
        self._running: EmbeddingModel | None = None  # the embedder's model, once loaded

    def require_model(self) -> None:
        """``ModelMismatch`` unless the store's vectors are the embedder's model's (a store with none
        adopts it). Blocks for the model load; call before embedding anything stored or compared."""
        if self._model_known():
            return
        if self._running is None:
            self._running = running_model(self.embedder)
        recorded = self.store.models.adopt(self._running)
        if not recorded.makes_same_vectors(self._running):
            self.store.models.forget()  # ask again next time: a reembed may have fixed it by then
            raise ModelMismatch(mismatch_message(recorded, self._running))

    def _model_known(self) -> bool:
        """Whether the store's model is known (without a query) to be the embedder's."""
        known, running = self.store.models.known, self._running
        return known is not None and running is not None and known.makes_same_vectors(running)

    async def _require_model(self) -> None:
        """``require_model`` without a thread or a query once the store's model is known to match."""
        if not self._model_known():
            await _run(self.require_model)

    def scope(self, project: str | None, caller: Caller | None = None) -> Scope:
        """The call's org and project: the caller's key's, or without one the server's own org."""
        requested = check_project(project) if project is not None else None
        if caller is None:
            return Scope(org=self.org, project=requested or self.default_project)
        return Scope(
            org=caller.org, project=caller.project_for(requested, self.default_project), actor=caller.actor
        )

    async def save(self, *, project: str | None = None, who: Who = NO_KEY, **fields: Any) -> SaveLessonResult:
        """``save_lesson``; ``fields`` are the lesson's, as ``make_draft`` checks them."""
        scope, recorded = self.scope(project, who.caller), who.note("save")
        async with failures_recorded(self.store, scope, recorded):
            draft, kinds = make_draft(**fields)
            [result] = await _run(functools.partial(self.store_drafts, activity=recorded), scope, [draft])
        return SaveLessonResult(
            id=result.id,
            merged=result.merged,
            redacted=list(kinds),
            similar=[SimilarLesson(id=i, score=score) for i, score in result.similar],
        )

    # Checks and redacts a lesson; a method too, for the benchmarks' bulk loading.
    make_draft = staticmethod(make_draft)

    def vectors_of(self, drafts: Sequence[LessonDraft]) -> list[np.ndarray]:
        """The drafts' vectors, by the store's model (``require_model`` first); blocking."""
        if not drafts:
            return []
        self.require_model()
        texts = [embedding_text(d.problem, d.resolution) for d in drafts]
        return self.embedder.encode_documents(texts, bulk=True)  # imports' work: every core

    def store_drafts(
        self,
        scope: Scope,
        drafts: Sequence[LessonDraft],
        vectors: Sequence[np.ndarray] | None = None,
        *,
        keep_ids: bool = False,
        activity: ActivityNote | None = None,
    ) -> list[SaveResult]:
        """Embed checked drafts (unless ``vectors`` given) and store them with the call's
        ``activity`` in one transaction: the one write path of new lessons (imports ``keep_ids``,
        see ``Store.save_many``); blocking. A model change meanwhile names the fix."""
        if vectors is None:
            vectors = self.vectors_of(drafts)
        try:
            items = list(zip(drafts, vectors, strict=True))
            return self.store.save_many(scope, items, keep_ids=keep_ids, activity=activity)
        except ModelChangedError:
            self.require_model()
            raise

    async def recall(
        self,
        *,
        query: str,
        project: str | None = None,
        verbose: bool = False,
        who: Who = NO_KEY,
        **asked: Any,
    ) -> RecallResult:
        """``recall_lessons``; ``asked`` is the rest of the query (tags, limit...), as ``search`` takes it."""
        scope, recorded = self.scope(project, who.caller), who.note("recall")
        async with failures_recorded(self.store, scope, recorded):
            text, hits = await self.search(scope, query, **asked)
            # The log keeps the redacted query and the ranked ids. Held in memory
            # (Store.append_activity): a worker-thread hop would cost the recall more.
            returned = tuple(Recalled(h.lesson.id, rank, h.score) for rank, h in enumerate(hits, start=1))
            self.store.append_activity(scope, dataclasses.replace(recorded, query=text, results=returned))
        shape, scored = (LessonOut, RecalledLesson) if verbose else (CompactLesson, CompactRecalledLesson)
        return RecallResult(lessons=[scored(**shape.of(h.lesson).model_dump(), score=h.score) for h in hits])

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        tags: Sequence[str] = (),
        limit: int = 5,
        min_confidence: float = 0.0,
    ) -> tuple[str, list[ScoredLesson]]:
        """The redacted query and its lessons, recording nothing (callers log their own kind)."""
        checked = check_text("query", query, MAX_TEXT_CHARS, required=True)
        check_confidence(min_confidence, name="min_confidence")
        clean_tags = check_tags(tags)
        # The query is redacted too: a secret pasted into a query must not reach the model or logs.
        text = redact(checked).text
        await self._require_model()
        try:
            hits = await self._recall_while_embedding(
                scope, text, tags=clean_tags, min_confidence=min_confidence, limit=limit
            )
        except ModelChangedError:
            await _run(self.require_model)
            raise
        return text, hits

    async def _recall_while_embedding(self, scope: Scope, text: str, **query: Any) -> list[ScoredLesson]:
        """One ``store.recall`` overlapping the embed: words match first, then it awaits the vector,
        set on the encoding thread (not a turn of the event loop later, a hop of 0.1-0.6 ms)."""
        vector: Future[np.ndarray] = Future()

        def embed() -> None:
            try:
                vector.set_result(self.embedder.encode_query(text))
            except BaseException as error:  # the store's wait ends with it
                vector.set_exception(error)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, embed)
                asked = RecallQuery(text=text, vector=vector.result, **query)
                # Outside the shared pool: it waits on an encode that needs a pool thread (no deadlock).
                own = anyio.CapacityLimiter(1)
                hits = await anyio.to_thread.run_sync(self.store.recall, scope, asked, limiter=own)
        except BaseExceptionGroup as group:  # one failure is the answer, not a group of them
            raise group.exceptions[0] from None
        return hits

    async def get(self, lesson_id: str, project: str | None = None, *, who: Who = NO_KEY) -> LessonOut:
        return LessonOut.of(await _run(self.store.get, self.scope(project, who.caller), check_id(lesson_id)))

    async def vote(
        self, lesson_id: str, *, up: bool, project: str | None = None, who: Who = NO_KEY
    ) -> VoteResult:
        scope, recorded = self.scope(project, who.caller), who.note("vote")
        async with failures_recorded(self.store, scope, recorded):
            vote = functools.partial(self.store.vote, activity=recorded)
            lesson = await _run(vote, scope, check_id(lesson_id), up)
        return VoteResult(id=lesson.id, upvotes=lesson.upvotes, downvotes=lesson.downvotes)

    async def delete(self, lesson_id: str, project: str | None = None, *, who: Who = NO_KEY) -> DeleteResult:
        scope, recorded = self.scope(project, who.caller), who.note("delete")
        async with failures_recorded(self.store, scope, recorded):
            delete = functools.partial(self.store.delete, activity=recorded)
            lesson = await _run(delete, scope, check_id(lesson_id))
        return DeleteResult(id=lesson.id, deleted=True)

    async def list(
        self,
        *,
        project: str | None = None,
        tags: Sequence[str] = (),
        limit: int = 20,
        cursor: str | None = None,
        verbose: bool = False,
        who: Who = NO_KEY,
    ) -> ListResult:
        scope = self.scope(project, who.caller)
        check_cursor(cursor)
        page = await _run(self.store.list, scope, check_tags(tags), limit, cursor)
        shape = LessonOut if verbose else CompactLesson
        return ListResult(lessons=[shape.of(x) for x in page.lessons], next_cursor=page.next_cursor)

    async def update(
        self, lesson_id: str, *, project: str | None = None, who: Who = NO_KEY, **fields: Any
    ) -> UpdateLessonResult:
        """``update_lesson``; ``fields`` are those to change, as ``make_patch`` checks them."""
        scope, recorded = self.scope(project, who.caller), who.note("update")
        async with failures_recorded(self.store, scope, recorded):
            lesson_id = check_id(lesson_id)
            patch, kinds = make_patch(**fields)
            vector = None
            if patch.problem is not None or patch.resolution is not None:
                current = await _run(self.store.get, scope, lesson_id)
                text = embedding_text(
                    patch.problem or current.problem, patch.resolution or current.resolution
                )
                await self._require_model()
                [vector] = await self.embedder.aencode_documents([text])
            update = functools.partial(self.store.update, activity=recorded)
            try:  # a re-embed meanwhile gets a refusal naming the fix, not the change
                lesson = await _run(update, scope, lesson_id, patch, vector)
            except ModelChangedError:
                await _run(self.require_model)
                raise
        return UpdateLessonResult(**LessonOut.of(lesson).model_dump(), redacted=kinds)


async def _run(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(fn, *args)


@dataclasses.dataclass(frozen=True)
class OnLessons:
    """A service over the lesson service, reading its store: activity, structured memory, transfer."""

    lessons: LessonService

    @property
    def store(self) -> Store:
        return self.lessons.store
