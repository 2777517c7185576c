"""One project's lesson rows in one transaction (``SqlLessonTx``), over the one SQL layer.

``lessons`` has the same columns on both backends; a ``LessonDialect`` (the backend's leaf for
one transaction) gives what differs: vector storage and nearest search (pgvector HNSW;
``lesson_embeddings`` and ``VectorIndex``), word indexing (a generated ``tsvector``; FTS5 and
``lesson_tags``), ``FOR UPDATE`` on reads, and what writes stamp besides (the file's revision)."""

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
from stores.engine.activity_rows import ActivityLog
from stores.engine.embedding_model import ModelRecords
from stores.engine.lesson_images import by_kind, image_lesson, lesson_image, restored_embedding
from stores.engine.lessons import KINDS, Lesson, LessonPage, LessonPatch, Scope
from stores.engine.lessons import SCOPE as SCOPE  # for the backends, as ``LIVE`` beside it
from stores.engine.project_rows import ProjectTx
from stores.engine.sql import SqlTx
from stores.errors import NotFoundError

COLUMNS = ", ".join(("pk", *KINDS))
LIVE = "(expires_at IS NULL OR expires_at > :now)"
# The columns a write sets: a lesson's own but its id and project (the scope's).
_WRITTEN = [name for name in KINDS if name not in ("id", "project")]

Text = tuple[str, str, str | None]  # problem, resolution, context: what dedup compares
Change = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # a commit's (id, before, after)


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


class LessonDialect(Protocol):
    """A backend's side of one lesson transaction, made per transaction; it calls nothing above."""

    # The transaction's SQL, and the deadline-bounded one for tables and commits.
    sql: SqlTx
    project_sql: SqlTx
    # Appended to a read whose rows the transaction may change: " FOR UPDATE", or "".
    row_lock: str
    # Added to the columns ``by_id`` reads, for the lesson's vector (", embedding"), or "".
    embedding_select: str

    def generation(self) -> int: ...

    def ensure_dim(self, dim: int) -> None:
        """``InvalidInputError`` unless the store takes vectors of ``dim`` dimensions now."""

    def nearest(self, vectors: Sequence[np.ndarray], now: datetime) -> list[list[tuple[int, float]]]:
        """As ``SqlLessonTx.nearest``, in any order."""

    def columns(self, vector: np.ndarray | None) -> dict[str, Any]:
        """Columns a write sets besides the lesson's: the vector where the row holds it, stamps."""

    def copy_rows(self, scope: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """Insert ``rows`` (columns alike) in a few statements; each one's key by its id."""

    def written(self, key: int, lesson: Lesson, vector: np.ndarray | None, *, new: bool) -> None:
        """After row ``key`` is written: index its words, store a given vector the row lacks."""

    def embedding(self, row: Mapping[str, Any]) -> bytes | None:
        """The vector of a row ``by_id`` read, as float32 bytes."""

    def removed(self, key: int) -> None:
        """After row ``key`` was deleted: what else held it (words, vector, other processes' caches)."""

    def tagged(self, tags: str, count: str) -> str:
        """SQL true for a lesson with every tag bound as ``tags`` (``count`` of them)."""


class SqlLessonTx:
    """What the lesson rules need in one project transaction. ``now`` measures "live"; a write
    transaction locks rows read until it ends, and the dialect stamps its upkeep on writes."""

    def __init__(
        self, dialect: LessonDialect, scope: Scope, now: datetime, models: ModelRecords, activity: ActivityLog
    ) -> None:
        self.sql, self.scope, self.now, self._dialect = dialect.sql, scope, now, dialect
        self._models, self._activity, self._guarded = models, activity, False
        sql = self.sql  # how this database binds each kind of column, for ``_fields``
        casts: dict[str, Callable[[Any], Any]] = {
            "time": sql.stamp,
            "list": sql.listed,
            "json": lambda v: sql.dump(dict(v)),
        }
        self._casts = {kind: _unless_none(cast) for kind, cast in casts.items()}

    @property
    def _scope(self) -> dict[str, Any]:
        return {"org": self.scope.org, "project": self.scope.project, "now": self.sql.stamp(self.now)}

    def guard(self) -> None:
        """``ModelChangedError`` if re-embedded since read; call before writing or comparing vectors."""
        if not self._guarded:
            self._models.check(self._dialect.generation())
            self._guarded = True

    def nearest(self, vectors: Sequence[np.ndarray]) -> list[list[Near]]:
        """Per unit vector, up to ``MAX_SIMILAR`` live lessons at ``CANDIDATE_SIMILARITY`` or more,
        most similar (then smaller key) first; empty while the store holds no vectors."""
        found = self._dialect.nearest(vectors, self.now)
        keys = sorted({key for hits in found for key, _ in hits})
        texts: dict[int, tuple[str, Text]] = {}
        if keys:
            rows = self.sql.rows(
                f"SELECT pk, id, problem, resolution, context FROM lessons WHERE {self.sql.in_list('pk', 'keys')}",
                {"keys": self.sql.listed(keys)},
            )
            texts = {r["pk"]: (r["id"], (r["problem"], r["resolution"], r["context"])) for r in rows}
        # A held key gone meanwhile (deleted by another process during an import) is no neighbour.
        ordered = (sorted((h for h in hits if h[0] in texts), key=lambda h: (-h[1], h[0])) for hits in found)
        return [[Near(key, sim, *texts[key]) for key, sim in hits] for hits in ordered]

    def live_vectors(self) -> list[tuple[str, bytes | None]]:
        """Every live lesson's id and vector (float32 bytes), by id (``stores.engine.curation``)."""
        rows = self.sql.rows(
            f"SELECT pk, id{self._dialect.embedding_select} FROM lessons WHERE {SCOPE} AND {LIVE} ORDER BY id",
            self._scope,
        )
        return [(r["id"], self._dialect.embedding(r)) for r in rows]

    def by_id(self, lesson_id: str, *, live: bool = True, embedding: bool = True) -> Row | None:
        extra = self._dialect.embedding_select if embedding else ""
        where = f"{SCOPE} AND {LIVE}" if live else SCOPE
        rows = self.sql.rows(
            f"SELECT {COLUMNS}{extra} FROM lessons WHERE id = :id AND {where}{self._dialect.row_lock}",
            {**self._scope, "id": lesson_id},
        )
        if not rows:
            return None
        row = rows[0]
        return Row(row["pk"], self._lesson(row), self._dialect.embedding(row) if embedding else None)

    def insert(self, lesson: Lesson, vector: np.ndarray) -> Row:
        """Store a new lesson in this project, every field as given; the row as stored."""
        values = {**self._fields(lesson), **self._dialect.columns(vector)}
        names = ", ".join(values)
        marks = ", ".join(self._mark(name) for name in values)
        row = self.sql.rows(
            f"INSERT INTO lessons (id, org_id, project, {names}) VALUES (:id, :org, :project, {marks}) "
            f"RETURNING {COLUMNS}",
            {**values, **self._scope, "id": lesson.id},
        )[0]
        self._dialect.written(row["pk"], lesson, vector, new=True)
        return Row(row["pk"], self._lesson(row), vector.tobytes())

    def insert_many(self, lessons: Sequence[Lesson], vectors: Sequence[np.ndarray]) -> list[Row]:
        """``insert`` each lesson, several in a few statements (``copy_rows``); rows in order, lessons as given."""
        if len(lessons) == 1:
            return [self.insert(lessons[0], vectors[0])]
        values = [
            {**self._fields(lesson), **self._dialect.columns(vec), "id": lesson.id}
            for lesson, vec in zip(lessons, vectors, strict=True)
        ]
        keys = self._dialect.copy_rows(self._scope, values)
        for lesson, vec in zip(lessons, vectors, strict=True):
            self._dialect.written(keys[lesson.id], lesson, vec, new=True)
        return [
            Row(keys[lesson.id], lesson, vec.tobytes()) for lesson, vec in zip(lessons, vectors, strict=True)
        ]

    def write(self, row: Row, lesson: Lesson, vector: np.ndarray | None) -> Row:
        """Replace ``row``'s fields but its id (and a given vector); the row as stored, vector included."""
        values = {**self._fields(lesson), **self._dialect.columns(vector)}
        sets = ", ".join(f"{name} = {self._mark(name)}" for name in values)
        stored = self.sql.rows(
            f"UPDATE lessons SET {sets} WHERE pk = :pk RETURNING {COLUMNS}", {**values, "pk": row.key}
        )[0]
        self._dialect.written(row.key, lesson, vector, new=False)
        return Row(row.key, self._lesson(stored), row.embedding if vector is None else vector.tobytes())

    def add_vote(self, lesson_id: str, up: bool) -> Lesson | None:
        column = "upvotes" if up else "downvotes"
        stamps = self._dialect.columns(None)
        # The column name is one of two literals above, never user text.
        sets = "".join(f", {name} = :{name}" for name in stamps)
        rows = self.sql.rows(
            f"UPDATE lessons SET {column} = {column} + 1{sets} "
            f"WHERE id = :id AND {SCOPE} AND {LIVE} RETURNING {COLUMNS}",
            {**stamps, **self._scope, "id": lesson_id},
        )
        return self._lesson(rows[0]) if rows else None

    def remove(self, key: int) -> None:
        self.sql.rows("DELETE FROM lessons WHERE pk = :pk", {"pk": key})
        self._dialect.removed(key)

    def page(self, tags: tuple[str, ...], limit: int, cursor: str | None) -> LessonPage:
        """``SqlStore.list``: live lessons newest first (ids below ``cursor``), with all of ``tags``."""
        sql = f"SELECT {COLUMNS} FROM lessons WHERE {SCOPE} AND {LIVE}"
        params: dict[str, Any] = {**self._scope, "n": limit + 1}
        if cursor is not None:
            sql += " AND id < :cursor"
            params["cursor"] = cursor
        if tags:
            sql += f" AND {self._dialect.tagged('tags', 'ntags')}"
            params.update(tags=self.sql.listed(tags), ntags=len(tags))
        rows = self.sql.rows(f"{sql} ORDER BY id DESC LIMIT :n", params)
        lessons = tuple(self._lesson(r) for r in rows[:limit])
        return LessonPage(lessons=lessons, next_cursor=lessons[-1].id if len(rows) > limit else None)

    def project(self, *, restoring: bool = False) -> ProjectTx:
        """The project's tables and commits in this transaction; ``restoring``: a revert may
        restore lessons (write transactions only), each after checking the store's model."""
        restore = self._restore if restoring else structured.read_only_lessons
        return ProjectTx(self._dialect.project_sql, self.scope, restore, self._activity)

    def image(self, row: Row) -> dict[str, Any]:
        """A commit's image of the row, with its vector and the model generation it belongs to."""
        if row.embedding is None:
            return lesson_image(row.lesson)
        return lesson_image(row.lesson, row.embedding, self._dialect.generation())

    def record(self, kind: str, changes: list[Change], activity: ActivityNote | None = None) -> None:
        """The commit of this transaction's lesson changes, with the call's ``activity`` entry."""
        structured.record_lessons(self.project(), kind, self.scope.actor, changes, activity)

    def _restore(self, lesson_id: str, image: Mapping[str, Any] | None) -> None:
        """Make the lesson ``image`` (None: gone), taking its vector only where text changed."""
        self.guard()
        row = self.by_id(lesson_id, live=False, embedding=False)
        if image is None:
            if row is not None:
                self.remove(row.key)
            return
        current = (row.lesson.problem, row.lesson.resolution) if row is not None else None
        embedding = restored_embedding(lesson_id, image, current, self._dialect.generation())
        vec = np.frombuffer(embedding, dtype=np.float32) if embedding is not None else None
        lesson = dataclasses.replace(image_lesson(image), id=lesson_id, project=self.scope.project)
        if row is not None:
            self.write(row, lesson, vec)
            return
        assert vec is not None  # restored_embedding gives one for a lesson that is gone
        self._dialect.ensure_dim(vec.shape[0])
        self.insert(lesson, vec)

    def _mark(self, name: str) -> str:
        return self.sql.json(name) if KINDS.get(name) == "json" else f":{name}"

    def _fields(self, lesson: Lesson) -> dict[str, Any]:
        """The lesson's columns but its id and project, as the database binds them."""
        values = by_kind(vars(lesson), self._casts)
        return {name: values[name] for name in _WRITTEN}

    def _lesson(self, row: Mapping[str, Any]) -> Lesson:
        return lesson_of(decoded(self.sql, row))


class RolledBack(Exception):
    """Raised inside a transaction to end it undone (a write probe's)."""


def not_found(scope: Scope, lesson_id: str) -> NotFoundError:
    return NotFoundError(f"No lesson {lesson_id} in project '{scope.project}' (it may have expired).")


def live_row(tx: SqlLessonTx, lesson_id: str, *, embedding: bool = True) -> Row:
    """The live lesson with this id, or ``NotFoundError``."""
    row = tx.by_id(lesson_id, embedding=embedding)
    if row is None:
        raise not_found(tx.scope, lesson_id)
    return row


def patched(lesson: Lesson, patch: LessonPatch, now: datetime) -> Lesson:
    """The lesson with the patch's fields, changed at ``now``."""
    changed = {f.name: getattr(patch, f.name) for f in dataclasses.fields(patch) if f.name != "clear"}
    fields: dict[str, Any] = {name: value for name, value in changed.items() if value is not None}
    fields.update(dict.fromkeys(patch.clear))  # None there means "unchanged", so clearing is named
    return dataclasses.replace(lesson, **fields, updated_at=now)


def count_live(sql: SqlTx, org: str, project: str | None, now: datetime) -> int:
    """``SqlStore.count``: the org's live lessons, in one project or all of them."""
    where = f"org_id = :org AND {LIVE}" + (" AND project = :project" if project is not None else "")
    found = sql.rows(
        f"SELECT count(*) AS n FROM lessons WHERE {where}",
        {"org": org, "project": project, "now": sql.stamp(now)},
    )
    return int(found[0]["n"])


def decoded(sql: SqlTx, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with tags and times decoded; meta stays as given (recall keeps it text until chosen)."""
    return {**row, **by_kind(row, {"time": _unless_none(sql.time), "list": sql.load})}


def lesson_of(row: Mapping[str, Any]) -> Lesson:
    """A decoded row's lesson; meta may still be JSON text (recall leaves it so until chosen)."""
    return Lesson(**by_kind(row, _FROM_ROW))


_FROM_ROW: dict[str, Callable[[Any], Any]] = {
    "list": tuple,
    "float": float,
    "int": int,
    "json": lambda v: json.loads(v) if isinstance(v, str) else dict(v),
}


def _unless_none(cast: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else cast(value)
