"""Lessons' writes, written once over a small per-backend transaction (``LessonTx``).

Saving and importing (one batch path, with ``dedup``), updating, voting, deleting and restoring
are the same rules on every backend, only the SQL differs; so ``LessonWrites`` holds them over a
backend's ``LessonTx``. Every write records a commit with each lesson's image before and after
in the same transaction, so history shows it and a revert undoes it through ``restore``."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from datetime import datetime

import numpy as np

from stores.engine import dedup, structured
from stores.engine.activity import ActivityNote
from stores.engine.keys import KeyStore
from stores.engine.lesson_images import lesson_image, merged_fields
from stores.engine.lesson_tx import (
    Change,
    LessonTx,
    Near,
    Row,
    Text,
    image,
    live_row,
    not_found,
    patched,
    record,
    restorer,
)
from stores.engine.lessons import Lesson, LessonDraft, LessonPatch, Neighbour, SaveResult, Scope
from stores.engine.structured import ProjectTx
from stores.engine.vectors import unit_vector
from stores.errors import InvalidInputError
from stores.ids import new_id


class LessonWrites:
    """``LessonStore``'s writes over a backend's ``_lesson_writer`` and ``_lesson_reader``."""

    def _lesson_writer(
        self, scope: Scope, vectors: Sequence[np.ndarray]
    ) -> contextlib.AbstractContextManager[LessonTx]:
        """A write transaction, once ``vectors`` fit (the first vector fixes the dimension)."""
        raise NotImplementedError

    def _lesson_reader(self, scope: Scope) -> contextlib.AbstractContextManager[LessonTx]:
        """A read-only transaction on the project."""
        raise NotImplementedError

    def ensure_dim(self, dim: int) -> None:
        raise NotImplementedError

    def _key_store(self) -> KeyStore:
        """The backend's orgs and keys, made once (``keys``)."""
        raise NotImplementedError

    @property
    def keys(self) -> KeyStore:
        """Orgs and API keys beside the lessons, the same object on every access."""
        if getattr(self, "_keys", None) is None:
            self._keys = self._key_store()
        return self._keys

    def save(self, scope: Scope, draft: LessonDraft, vector: Sequence[float]) -> SaveResult:
        return self.save_many(scope, [(draft, vector)])[0]

    def save_many(
        self,
        scope: Scope,
        items: Sequence[tuple[LessonDraft, Sequence[float] | np.ndarray]],
        *,
        keep_ids: bool = False,
        activity: ActivityNote | None = None,
    ) -> list[SaveResult]:
        if not items:
            return []
        drafts = [draft for draft, _ in items]
        vectors = [unit_vector(vec) for _, vec in items]
        with self._lesson_writer(scope, vectors) as tx:
            tx.guard()
            batch = _Batch(tx, keep_ids=keep_ids, capacity=len(items))
            saving = batch.fresh(drafts)
            nearest = dict(zip(saving, tx.nearest([vectors[i] for i in saving]), strict=True))
            results = [
                batch.save(draft, vectors[i], nearest[i])
                if i in nearest
                else SaveResult(id=str(draft.id), merged=False, skipped=True)
                for i, draft in enumerate(drafts)
            ]
            batch.flush()
            if batch.changes:
                single = "merge" if results[0].merged else "save"
                record(tx, "import" if keep_ids or len(items) > 1 else single, batch.changes, activity)
            else:
                _log(tx, activity)
        return results

    def update(
        self,
        scope: Scope,
        lesson_id: str,
        patch: LessonPatch,
        vector: Sequence[float] | None,
        *,
        activity: ActivityNote | None = None,
    ) -> Lesson:
        vec = unit_vector(vector) if vector is not None else None
        with self._lesson_writer(scope, [vec] if vec is not None else []) as tx:
            if vec is not None:
                tx.guard()
            row = live_row(tx, lesson_id)
            after = tx.write(row.key, patched(row.lesson, patch, tx.now), vec)
            embedding = row.embedding if vec is None else vec.tobytes()
            changes: list[Change] = [(lesson_id, image(tx, row), image(tx, Row(row.key, after, embedding)))]
            record(tx, "update", changes, activity)
            return after

    def delete(self, scope: Scope, lesson_id: str, *, activity: ActivityNote | None = None) -> Lesson:
        with self._lesson_writer(scope, []) as tx:
            row = live_row(tx, lesson_id)
            tx.remove(row.key)
            record(tx, "delete", [(lesson_id, image(tx, row), None)], activity)
            return row.lesson

    def vote(self, scope: Scope, lesson_id: str, up: bool, *, activity: ActivityNote | None = None) -> Lesson:
        with self._lesson_writer(scope, []) as tx:
            after = tx.add_vote(lesson_id, up)
            if after is None:
                raise not_found(scope, lesson_id)
            # The vote changed nothing else.
            before = dataclasses.replace(
                after, upvotes=after.upvotes - int(up), downvotes=after.downvotes - int(not up)
            )
            record(tx, "vote", [(lesson_id, lesson_image(before), lesson_image(after))], activity)
            return after

    def merge_lessons(
        self,
        scope: Scope,
        keep_id: str,
        drop_id: str,
        patch: LessonPatch,
        vector: Sequence[float] | np.ndarray | None,
        *,
        activity: ActivityNote | None = None,
    ) -> Lesson:
        """Fold ``drop_id`` into ``keep_id`` (patch, summed votes) in one ``merge`` commit."""
        if keep_id == drop_id:
            raise InvalidInputError("A lesson cannot be merged into itself; name two lessons.")
        vec = unit_vector(vector) if vector is not None else None
        with self._lesson_writer(scope, [vec] if vec is not None else []) as tx:
            if vec is not None:
                tx.guard()
            keep, drop = live_row(tx, keep_id), live_row(tx, drop_id)
            merged = dataclasses.replace(
                patched(keep.lesson, patch, tx.now),
                upvotes=keep.lesson.upvotes + drop.lesson.upvotes,
                downvotes=keep.lesson.downvotes + drop.lesson.downvotes,
            )
            after = tx.write(keep.key, merged, vec)
            tx.remove(drop.key)
            embedding = keep.embedding if vec is None else vec.tobytes()
            changes: list[Change] = [
                (keep_id, image(tx, keep), image(tx, Row(keep.key, after, embedding))),
                (drop_id, image(tx, drop), None),
            ]
            record(tx, "merge", changes, activity)
            return after

    @contextlib.contextmanager
    def transaction(self, scope: Scope, *, write: bool) -> Iterator[ProjectTx]:
        """The project's tables and history in one transaction (a write one restores lessons)."""
        if write:
            with self._lesson_writer(scope, []) as tx:
                yield tx.project(restorer(tx))
        else:
            with self._lesson_reader(scope) as tx:
                yield tx.project(structured.read_only_lessons)

    def neighbours(self, scope: Scope, vectors: Sequence[Sequence[float]]) -> list[list[Neighbour]]:
        vecs = [unit_vector(v) for v in vectors]
        with self._lesson_reader(scope) as tx:
            return [[Neighbour(n.id, n.similarity, n.text) for n in near] for near in tx.nearest(vecs)]


class _Batch:
    """Drafts saved in one transaction, each checked against stored lessons and earlier drafts.
    New rows are written together (one COPY on Postgres) at the end or before a draft merges
    into one; until then they have stand-in keys above every real one."""

    def __init__(self, tx: LessonTx, *, keep_ids: bool, capacity: int) -> None:
        self.tx = tx
        self.keep_ids = keep_ids
        self.capacity = capacity
        self.changes: list[Change] = []
        self.pending: list[Near] = []  # saved earlier in this batch
        self.matrix: np.ndarray | None = None  # their vectors, one row each
        self.unwritten: list[tuple[int, int, Lesson, np.ndarray]] = []  # change index, key, lesson, vector
        self.texts: dict[int, Text] = {}  # text of rows written in this batch, as it is now

    def fresh(self, drafts: Sequence[LessonDraft]) -> list[int]:
        """Positions of drafts to save: all, or keeping ids, the first of each id not yet held."""
        if not self.keep_ids:
            return list(range(len(drafts)))
        ids = [draft.id for draft in drafts if draft.id is not None]
        taken = self.tx.project(structured.read_only_lessons).existing_lesson_ids(ids) if ids else set()
        fresh: list[int] = []
        for i, draft in enumerate(drafts):
            if draft.id is None:
                fresh.append(i)
            elif draft.id not in taken:
                fresh.append(i)
                taken.add(draft.id)
        return fresh

    def save(self, draft: LessonDraft, vec: np.ndarray, stored: list[Near]) -> SaveResult:
        neighbours = self.neighbours(vec, stored)
        text = (draft.problem, draft.resolution, draft.context)
        target = dedup.merge_target(text, ((n.key, n.similarity, n.text) for n in neighbours))
        similar = tuple((n.id, round(n.similarity, 6)) for n in neighbours if n.key != target)
        if target is not None:
            lesson_id = next(n.id for n in neighbours if n.key == target)
            if target >= _UNWRITTEN:
                self.flush()
            self.merge(lesson_id, draft)
            return SaveResult(id=lesson_id, merged=True, similar=similar)
        lesson = drafted(draft, self.tx.scope, self.tx.now, keep_id=self.keep_ids)
        key = _UNWRITTEN + len(self.pending)
        self.unwritten.append((len(self.changes), key, lesson, vec))
        self.changes.append((lesson.id, None, None))  # its image once written (``flush``)
        if self.matrix is None:
            self.matrix = np.empty((self.capacity, vec.shape[0]), dtype=np.float32)
        self.matrix[len(self.pending)] = vec
        self.pending.append(Near(key, 1.0, lesson.id, text))
        self.texts[key] = text
        return SaveResult(id=lesson.id, merged=False, similar=similar)

    def flush(self) -> None:
        """Write the rows saved since the last flush, and give them their real keys."""
        if not self.unwritten:
            return
        rows = self.tx.insert_many([u[2] for u in self.unwritten], [u[3] for u in self.unwritten])
        real: dict[int, int] = {}
        for (change, key, _, _), row in zip(self.unwritten, rows, strict=True):
            self.changes[change] = (row.lesson.id, None, image(self.tx, row))
            real[key] = row.key
        self.pending = [dataclasses.replace(n, key=real.get(n.key, n.key)) for n in self.pending]
        self.texts = {real.get(key, key): text for key, text in self.texts.items()}
        self.unwritten = []

    def neighbours(self, vec: np.ndarray, stored: list[Near]) -> list[Near]:
        """Up to ``MAX_SIMILAR`` near neighbours, stored or earlier in the batch, with current text."""
        found = {n.key: n for n in stored}
        if self.pending and self.matrix is not None:
            sims = self.matrix[: len(self.pending)] @ vec
            for i in np.flatnonzero(sims >= dedup.CANDIDATE_SIMILARITY):
                near = self.pending[i]
                found[near.key] = dataclasses.replace(near, similarity=float(sims[i]))
        ordered = sorted(found.values(), key=lambda n: (-n.similarity, n.key))[: dedup.MAX_SIMILAR]
        return [dataclasses.replace(n, text=self.texts.get(n.key, n.text)) for n in ordered]

    def merge(self, lesson_id: str, draft: LessonDraft) -> None:
        row = self.tx.by_id(lesson_id, live=False)
        assert row is not None  # a neighbour, locked by this transaction
        fields = merged_fields(row.lesson, draft)
        merged = dataclasses.replace(
            row.lesson, **{**fields, "tags": tuple(fields["tags"])}, updated_at=self.tx.now
        )
        after = self.tx.write(row.key, merged, None)
        self.texts[row.key] = (after.problem, after.resolution, after.context)
        self.changes.append(
            (lesson_id, image(self.tx, row), image(self.tx, Row(row.key, after, row.embedding)))
        )


# Stand-in keys of unwritten rows: above every real key, as a later write would get.
_UNWRITTEN = 2**62


def _log(tx: LessonTx, note: ActivityNote | None) -> None:
    """The entry of a call that changed nothing (a change's is written with its commit)."""
    if note is not None:
        tx.project(structured.read_only_lessons).append_activity(note)


def drafted(draft: LessonDraft, scope: Scope, now: datetime, *, keep_id: bool = False) -> Lesson:
    """The lesson a draft becomes: its times or now, its id when kept (an import) or a new one."""
    created = draft.created_at or now
    made = {
        "id": draft.id if keep_id and draft.id is not None else new_id(draft.created_at),
        "project": scope.project,
        "created_at": created,
        "updated_at": draft.updated_at or created,
        "meta": dict(draft.meta),
    }
    return Lesson(**{**vars(draft), **made})
