"""``LessonTx``, the dozen row reads and writes each backend supplies to the lesson rules in one
project transaction, and the helpers over it that the rules and both backends share."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from stores.engine import structured
from stores.engine.activity import ActivityNote
from stores.engine.lesson_images import by_kind, image_lesson, lesson_image, restored_embedding
from stores.engine.lessons import Lesson, LessonPatch, Scope
from stores.engine.structured import ProjectTx
from stores.errors import InvalidInputError, NotFoundError

Text = tuple[str, str, str | None]  # problem, resolution, context: what dedup compares
Change = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # a commit's (id, before, after)
# A revert's hook for lessons (``stores.engine.structured.ProjectTx.restore_lesson``).
Restorer = Callable[[str, Any], None]


@dataclass(frozen=True)
class Row:
    """A read lesson: its row key, the lesson, and float32 vector bytes (None if unread or none)."""

    key: int
    lesson: Lesson
    embedding: bytes | None = None


@dataclass(frozen=True)
class Near:
    """A live lesson near a vector: its key, cosine similarity, id and text."""

    key: int
    similarity: float
    id: str
    text: Text


class LessonTx(Protocol):
    """What the lesson rules need in one project transaction. ``now`` measures "live"; a write
    transaction locks rows read until it ends, and the backend stamps its upkeep on writes."""

    scope: Scope
    now: datetime

    def guard(self) -> None:
        """``ModelChangedError`` if re-embedded since read; call before writing or comparing vectors."""
        ...

    def generation(self) -> int:
        """The store's model generation, which commit images record with their vectors."""
        ...

    def ensure_dim(self, dim: int) -> None:
        """``InvalidInputError`` unless the store can take vectors of ``dim`` dimensions now."""
        ...

    def nearest(self, vectors: Sequence[np.ndarray]) -> list[list[Near]]:
        """Per unit vector, up to ``MAX_SIMILAR`` live lessons at ``CANDIDATE_SIMILARITY`` or more,
        most similar (then smaller key) first; empty while the store holds no vectors."""
        ...

    def by_id(self, lesson_id: str, *, live: bool = True, embedding: bool = True) -> Row | None:
        """The project's lesson with this id (a live one only, unless ``live`` is False)."""
        ...

    def insert(self, lesson: Lesson, vector: np.ndarray) -> Row:
        """Store a new lesson in this project, every field as given; the row as stored."""
        ...

    def insert_many(self, lessons: Sequence[Lesson], vectors: Sequence[np.ndarray]) -> list[Row]:
        """``insert`` each lesson, one statement where there are round trips; rows in order."""
        ...

    def write(self, key: int, lesson: Lesson, vector: np.ndarray | None) -> Lesson:
        """Replace row ``key``'s fields but its id (and a given vector); the lesson as stored."""
        ...

    def add_vote(self, lesson_id: str, up: bool) -> Lesson | None:
        """Count one vote on the live lesson; the lesson after, None when there is none."""
        ...

    def remove(self, key: int) -> None:
        """Delete row ``key``."""
        ...

    def project(self, restore: Restorer) -> ProjectTx:
        """The project's tables and commits in this same transaction."""
        ...


def check_dims(vectors: Sequence[np.ndarray], dim: int) -> None:
    """``InvalidInputError`` unless every vector has the store's ``dim`` dimensions."""
    if any(v.shape[0] != dim for v in vectors):
        raise InvalidInputError(f"All vectors must have {dim} dimensions.")


def not_found(scope: Scope, lesson_id: str) -> NotFoundError:
    return NotFoundError(f"No lesson {lesson_id} in project '{scope.project}' (it may have expired).")


def live_row(tx: LessonTx, lesson_id: str, *, embedding: bool = True) -> Row:
    """The live lesson with this id, or ``NotFoundError``."""
    row = tx.by_id(lesson_id, embedding=embedding)
    if row is None:
        raise not_found(tx.scope, lesson_id)
    return row


def image(tx: LessonTx, row: Row) -> dict[str, Any]:
    """A commit's image of the row, with its vector and the model generation it belongs to."""
    if row.embedding is None:
        return lesson_image(row.lesson)
    return lesson_image(row.lesson, row.embedding, tx.generation())


def record(
    tx: LessonTx, kind: str, changes: list[Change], activity: ActivityNote | None = None
) -> structured.Commit:
    """The commit of this transaction's lesson changes, with the call's ``activity`` entry."""
    project = tx.project(structured.read_only_lessons)
    return structured.record_lessons(project, kind, tx.scope.actor, changes, activity)


def restore(tx: LessonTx, lesson_id: str, image: Mapping[str, Any] | None) -> None:
    """Make the lesson ``image`` (None: gone), taking its vector only where text changed."""
    row = tx.by_id(lesson_id, live=False, embedding=False)
    if image is None:
        if row is not None:
            tx.remove(row.key)
        return
    current = (row.lesson.problem, row.lesson.resolution) if row is not None else None
    embedding = restored_embedding(lesson_id, image, current, tx.generation())
    vec = np.frombuffer(embedding, dtype=np.float32) if embedding is not None else None
    lesson = dataclasses.replace(image_lesson(image), id=lesson_id, project=tx.scope.project)
    if row is not None:
        tx.write(row.key, lesson, vec)
        return
    assert vec is not None  # restored_embedding gives one for a lesson that is gone
    tx.ensure_dim(vec.shape[0])
    tx.insert(lesson, vec)


def restorer(tx: LessonTx) -> Restorer:
    """``restore`` in this transaction, checking the store's model first (a revert's hook)."""

    def restore_lesson(lesson_id: str, image: Any) -> None:
        tx.guard()
        restore(tx, lesson_id, image)

    return restore_lesson


def patched(lesson: Lesson, patch: LessonPatch, now: datetime) -> Lesson:
    """The lesson with the patch's fields, changed at ``now``."""
    changed = {f.name: getattr(patch, f.name) for f in dataclasses.fields(patch) if f.name != "clear"}
    fields: dict[str, Any] = {name: value for name, value in changed.items() if value is not None}
    fields.update(dict.fromkeys(patch.clear))  # None there means "unchanged", so clearing is named
    return dataclasses.replace(lesson, **fields, updated_at=now)


def lesson_of(row: Mapping[str, Any]) -> Lesson:
    """A decoded row's lesson; meta may still be JSON text (recall leaves it so until chosen)."""
    return Lesson(**by_kind(row, _FROM_ROW))


_FROM_ROW: dict[str, Callable[[Any], Any]] = {
    "list": tuple,
    "float": float,
    "int": int,
    "json": lambda v: json.loads(v) if isinstance(v, str) else dict(v),
}


class ModelChecks:
    """``LessonTx.guard`` and ``generation``: ``ModelRecords`` checks what ``read`` reads here."""

    def __init__(self, models: _GenerationCheck, read: Callable[[], int]) -> None:
        self._models = models
        self._read = read
        self._guarded = False

    def guard(self) -> None:
        if not self._guarded:
            self._models.check(self._read())
            self._guarded = True

    def generation(self) -> int:
        return self._read()


class _GenerationCheck(Protocol):
    def check(self, current: int) -> int: ...
