"""Lessons' writes, written once over a small per-backend transaction (``LessonTx``).

Saving (with the near-duplicate rule of ``stores.engine.dedup``), updating, voting, deleting,
importing and restoring a lesson for a revert are the same rules on every backend; only
the SQL differs. So the rules live here, in ``LessonWrites`` (the write half of
``stores.engine.lessons.LessonStore``), and each backend supplies a ``LessonTx``: a dozen reads
and writes of lesson rows inside one transaction on one project
(``stores.sqlite.lesson_rows``, ``stores.postgres.lesson_rows``), as ``stores.engine.structured``
does for tables over ``ProjectTx``.

Every write records a commit (``stores.engine.structured.record_lessons``) with each lesson's
image before and after (``stores.engine.lessons.lesson_image``), in the same transaction, so
history shows it and a revert can undo it through ``restore``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from stores.engine import dedup, structured
from stores.engine.keys import KeyStore
from stores.engine.lesson_images import image_embedding, lesson_image, merged_fields, merged_image
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
    restore,
    restorer,
)
from stores.engine.lessons import Lesson, LessonDraft, LessonPatch, Neighbour, SaveResult, Scope
from stores.engine.structured import ProjectTx
from stores.engine.vectors import unit_vector
from stores.ids import new_id


class LessonWrites:
    """The writes of ``stores.engine.lessons.LessonStore``, for a backend that supplies
    ``_lesson_writer`` and ``_lesson_reader`` (and ``ensure_dim``)."""

    def _lesson_writer(
        self, scope: Scope, vectors: Sequence[np.ndarray]
    ) -> contextlib.AbstractContextManager[LessonTx]:
        """A write transaction on the project, once the store takes ``vectors``
        (``check_dims``): the first vector a store gets fixes its dimension."""
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
        """Orgs and API keys in the same file or database as the lessons (``stores.engine.keys``),
        the same object on every access."""
        if getattr(self, "_keys", None) is None:
            self._keys = self._key_store()
        return self._keys

    def save(self, scope: Scope, draft: LessonDraft, vector: Sequence[float]) -> SaveResult:
        return self.save_many(scope, [(draft, vector)])[0]

    def save_many(
        self, scope: Scope, items: Sequence[tuple[LessonDraft, Sequence[float]]]
    ) -> list[SaveResult]:
        if not items:
            return []
        vectors = [unit_vector(vec) for _, vec in items]
        with self._lesson_writer(scope, vectors) as tx:
            tx.guard()
            batch = _Batch(tx)
            results = [
                batch.save(draft, vec, stored)
                for (draft, _), vec, stored in zip(items, vectors, tx.nearest(vectors), strict=True)
            ]
            kind = ("merge" if results[0].merged else "save") if len(items) == 1 else "import"
            record(tx, kind, batch.changes)
        return results

    def update(
        self, scope: Scope, lesson_id: str, patch: LessonPatch, vector: Sequence[float] | None
    ) -> Lesson:
        vec = unit_vector(vector) if vector is not None else None
        with self._lesson_writer(scope, [vec] if vec is not None else []) as tx:
            if vec is not None:
                tx.guard()
            row = live_row(tx, lesson_id)
            after = tx.write(row.key, patched(row.lesson, patch, tx.now), vec)
            embedding = row.embedding if vec is None else vec.tobytes()
            record(tx, "update", [(lesson_id, image(tx, row), image(tx, Row(row.key, after, embedding)))])
            return after

    def delete(self, scope: Scope, lesson_id: str) -> Lesson:
        with self._lesson_writer(scope, []) as tx:
            row = live_row(tx, lesson_id)
            tx.remove(row.key)
            record(tx, "delete", [(lesson_id, image(tx, row), None)])
            return row.lesson

    def vote(self, scope: Scope, lesson_id: str, up: bool) -> Lesson:
        with self._lesson_writer(scope, []) as tx:
            after = tx.add_vote(lesson_id, up)
            if after is None:
                raise not_found(scope, lesson_id)
            # The vote changed nothing else.
            before = dataclasses.replace(
                after, upvotes=after.upvotes - int(up), downvotes=after.downvotes - int(not up)
            )
            record(tx, "vote", [(lesson_id, lesson_image(before), lesson_image(after))])
            return after

    @contextlib.contextmanager
    def transaction(self, scope: Scope, *, write: bool) -> Iterator[ProjectTx]:
        """The project's tables and history (``stores.engine.structured``) in one transaction; a
        write one restores lessons for a revert (``restore``)."""
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

    def import_lessons(self, scope: Scope, images: Sequence[Mapping[str, Any]]) -> tuple[int, int, int]:
        """Store lesson images (``lesson_image``, with vectors) whose ids are new to the
        project, in one transaction with one ``import`` commit; (added, skipped, merged).

        An image that adds nothing to a stored lesson, or to one earlier in the batch,
        merges into it by the rule of ``save`` (``stores.engine.dedup``)."""
        if not images:
            return 0, 0, 0
        # Before the transaction: a fresh store gets its vector storage from the first vector.
        for dim in sorted({len(vec) // 4 for vec in map(image_embedding, images) if vec}):
            self.ensure_dim(dim)
        with self._lesson_writer(scope, []) as tx:
            added, merged = _Import(tx).run(images)
        return added, len(images) - added - merged, merged


class _Batch:
    """Drafts saved one after another in one transaction: each is checked against the stored
    lessons and those saved before it in the batch."""

    def __init__(self, tx: LessonTx) -> None:
        self.tx = tx
        self.changes: list[Change] = []
        self.pending: list[tuple[Near, np.ndarray]] = []  # saved earlier in this batch
        self.texts: dict[int, Text] = {}  # text of rows written in this batch, as it is now

    def save(self, draft: LessonDraft, vec: np.ndarray, stored: list[Near]) -> SaveResult:
        neighbours = self.neighbours(vec, stored)
        text = (draft.problem, draft.resolution, draft.context)
        target = dedup.merge_target(text, ((n.key, n.similarity, n.text) for n in neighbours))
        similar = tuple((n.id, round(n.similarity, 6)) for n in neighbours if n.key != target)
        if target is not None:
            lesson_id = next(n.id for n in neighbours if n.key == target)
            self.merge(lesson_id, draft)
            return SaveResult(id=lesson_id, merged=True, similar=similar)
        row = self.tx.insert(drafted(draft, self.tx.scope, self.tx.now), vec)
        self.pending.append((Near(row.key, 1.0, row.lesson.id, text), vec))
        self.texts[row.key] = text
        self.changes.append((row.lesson.id, None, image(self.tx, row)))
        return SaveResult(id=row.lesson.id, merged=False, similar=similar)

    def neighbours(self, vec: np.ndarray, stored: list[Near]) -> list[Near]:
        """The draft's near neighbours, stored or saved earlier in this batch, most similar
        first, at most ``dedup.MAX_SIMILAR``, each with its text as it is now."""
        found = {n.key: n for n in stored}
        for near, other in self.pending:
            sim = float(other @ vec)
            if sim >= dedup.CANDIDATE_SIMILARITY:
                found[near.key] = dataclasses.replace(near, similarity=sim)
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


def drafted(draft: LessonDraft, scope: Scope, now: datetime) -> Lesson:
    """The lesson a new draft becomes: a new id, created (and updated) when the draft says, else now."""
    created = draft.created_at or now
    return Lesson(
        id=new_id(draft.created_at),
        project=scope.project,
        problem=draft.problem,
        resolution=draft.resolution,
        context=draft.context,
        tags=tuple(draft.tags),
        confidence=draft.confidence,
        source=draft.source,
        created_at=created,
        updated_at=created,
        expires_at=draft.expires_at,
        upvotes=0,
        downvotes=0,
        meta=dict(draft.meta),
    )


class _Import:
    """An import's images written in one transaction (``LessonWrites.import_lessons``)."""

    def __init__(self, tx: LessonTx) -> None:
        self.tx = tx
        self.before: dict[str, dict[str, Any] | None] = {}
        self.after: dict[str, dict[str, Any]] = {}
        self.pending: list[tuple[str, np.ndarray, Text]] = []  # added earlier in this batch

    def run(self, images: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """(added, merged); what is neither was skipped: its id is already in the project."""
        project = self.tx.project(structured.read_only_lessons)
        taken = project.existing_lesson_ids([image["id"] for image in images])
        # The first image of an id wins; the order of the file is kept.
        fresh = list({image["id"]: image for image in reversed(images) if image["id"] not in taken}.values())
        fresh.reverse()
        vectors = [unit_vector(np.frombuffer(image_embedding(i) or b"", dtype=np.float32)) for i in fresh]
        added = merged = 0
        for image_, vec, stored in zip(fresh, vectors, self.tx.nearest(vectors), strict=True):
            if self.put(image_, vec, stored):
                added += 1
            else:
                merged += 1
        if self.after:
            changes = [(i, self.before[i], self.after[i]) for i in self.after]
            structured.record_lessons(project, "import", self.tx.scope.actor, changes)
        return added, merged

    def put(self, new: Mapping[str, Any], vec: np.ndarray, stored: list[Near]) -> bool:
        """Add the image, or merge it into the lesson it adds nothing to; True when added."""
        text = (new["problem"], new["resolution"], new.get("context"))
        candidates = [(n.id, n.similarity, n.text) for n in stored] + [
            (i, float(v @ vec), t) for i, v, t in self.pending if float(v @ vec) >= dedup.CANDIDATE_SIMILARITY
        ]
        target = dedup.merge_target(text, candidates)
        self.tx.guard()
        if target is None:
            lesson = {**new, "project": self.tx.scope.project}
            self.before[new["id"]], self.after[new["id"]] = None, lesson
            restore(self.tx, new["id"], lesson)
            self.pending.append((new["id"], vec, text))
            return True
        current = self.after.get(target) or lesson_image(live_row(self.tx, target, embedding=False).lesson)
        self.before.setdefault(target, current)
        self.after[target] = merged_image(current, new)
        restore(self.tx, target, self.after[target])
        return False
