"""``stores.engine.lesson_rules.LessonTx`` on Postgres: the SQL of a lesson's rows.

The sibling of ``stores.sqlite.lesson_rows``. A lesson is one row of ``lessons`` (tags a
``text[]``, meta ``jsonb``, its vector a pgvector column searched by HNSW); writes
return the row as stored, so a commit's images need no second read. A write
transaction locks the rows it reads, besides the project's advisory lock that
``PostgresLessonStore._writing`` takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from stores.engine import dedup
from stores.engine.json_numbers import jsonb_text
from stores.engine.lesson_tx import ModelChecks, Near, Restorer, Row, lesson_of
from stores.engine.lessons import Lesson, Scope
from stores.engine.project_rows import SqlProjectTx
from stores.postgres.dims import PostgresDims
from stores.postgres.models import PostgresModelRecords
from stores.postgres.sql import PostgresSqlTx

COLUMNS = (
    "pk, id, project, problem, resolution, context, tags, confidence, source, "
    "created_at, updated_at, expires_at, upvotes, downvotes, meta"
)
SCOPED = "org_id = :org AND project = :project AND (expires_at IS NULL OR expires_at > :now)"
_FIELDS = (
    "problem = :problem, resolution = :resolution, context = :context, tags = :tags, "
    "confidence = :confidence, source = :source, created_at = :created_at, updated_at = :updated_at, "
    "expires_at = :expires_at, upvotes = :upvotes, downvotes = :downvotes, meta = CAST(:meta AS jsonb)"
)

# The parameters of _FIELDS that are the lesson's own values.
_PLAIN = (
    "problem",
    "resolution",
    "context",
    "confidence",
    "source",
    "created_at",
    "updated_at",
    "expires_at",
    "upvotes",
    "downvotes",
)


class PostgresLessonTx(ModelChecks):
    """One project's lessons inside a transaction the caller holds on ``conn``; ``lock``
    (a write transaction) locks every row it reads."""

    def __init__(
        self, models: PostgresModelRecords, dims: PostgresDims, conn: Connection, scope: Scope, *, lock: bool
    ) -> None:
        super().__init__(models, conn)
        self.dims = dims
        self.conn = conn
        self.scope = scope
        self.now = now()
        self._lock = " FOR UPDATE" if lock else ""

    def ensure_dim(self, dim: int) -> None:
        self.dims.check(self.conn, dim)

    def nearest(self, vectors: Sequence[np.ndarray]) -> list[list[Near]]:
        if not vectors or self.dims.stored(self.conn) is None:
            return [[] for _ in vectors]
        sql = text(
            f"SELECT pk, id, problem, resolution, context, 1 - (embedding <=> :q) AS sim FROM lessons "
            f"WHERE {SCOPED} ORDER BY embedding <=> :q LIMIT :k"
        )
        found = []
        for vec in vectors:
            rows = self.conn.execute(sql, {**self._scope, "q": vec, "k": dedup.MAX_SIMILAR}).all()
            near = [
                Near(r.pk, float(r.sim), r.id, (r.problem, r.resolution, r.context))
                for r in rows
                if r.sim >= dedup.CANDIDATE_SIMILARITY
            ]
            found.append(sorted(near, key=lambda n: (-n.similarity, n.key)))
        return found

    def by_id(self, lesson_id: str, *, live: bool = True, embedding: bool = True) -> Row | None:
        where = SCOPED if live else "org_id = :org AND project = :project"
        sql = f"SELECT {COLUMNS}{', embedding' if embedding else ''} FROM lessons WHERE id = :id AND {where}"
        rows = fetch(self.conn, sql + self._lock, {**self._scope, "id": lesson_id})
        if not rows:
            return None
        return Row(rows[0]["pk"], lesson_of(rows[0]), _bytes(rows[0]["embedding"]) if embedding else None)

    def insert(self, lesson: Lesson, vector: np.ndarray) -> Row:
        """Insert the lesson; the row as RETURNING gives it.

        (One statement that also looks for the duplicate, a WITH query around the INSERT,
        measured twice as slow as the two statements: the HNSW insert got slower.)
        """
        row = fetch(
            self.conn,
            "INSERT INTO lessons (id, org_id, project, problem, resolution, context, tags, confidence, "
            "source, created_at, updated_at, expires_at, upvotes, downvotes, meta, embedding) VALUES (:id, "
            ":org, :project, :problem, :resolution, :context, :tags, :confidence, :source, :created_at, "
            ":updated_at, :expires_at, :upvotes, :downvotes, CAST(:meta AS jsonb), :v) "
            f"RETURNING {COLUMNS}",
            {**_fields(lesson), **self._scope, "id": lesson.id, "v": vector},
        )[0]
        return Row(row["pk"], lesson_of(row), vector.tobytes())

    def write(self, key: int, lesson: Lesson, vector: np.ndarray | None) -> Lesson:
        embedding = ", embedding = :v" if vector is not None else ""
        sql = f"UPDATE lessons SET {_FIELDS}{embedding} WHERE pk = :pk RETURNING {COLUMNS}"
        return lesson_of(fetch(self.conn, sql, {**_fields(lesson), "pk": key, "v": vector})[0])

    def add_vote(self, lesson_id: str, up: bool) -> Lesson | None:
        column = "upvotes" if up else "downvotes"
        # The column name is one of two literals above, never user text.
        rows = fetch(
            self.conn,
            f"UPDATE lessons SET {column} = {column} + 1 WHERE id = :id AND {SCOPED} RETURNING {COLUMNS}",
            {**self._scope, "id": lesson_id},
        )
        return lesson_of(rows[0]) if rows else None

    def remove(self, key: int) -> None:
        self.conn.execute(text("DELETE FROM lessons WHERE pk = :pk"), {"pk": key})

    def project(self, restore: Restorer) -> SqlProjectTx:
        return SqlProjectTx(PostgresSqlTx(self.conn, bounded=True), self.scope, restore)

    @property
    def _scope(self) -> dict[str, Any]:
        return scope_params(self.scope, self.now)


def _fields(lesson: Lesson) -> dict[str, Any]:
    """The lesson's columns but its id, as parameters of ``_FIELDS``."""
    plain = {name: getattr(lesson, name) for name in _PLAIN}
    return {**plain, "tags": list(lesson.tags), "meta": jsonb_text(dict(lesson.meta))}


def _bytes(embedding: Any) -> bytes | None:
    """A vector as float32 bytes; pgvector hands back a Vector (or an ndarray, depending on
    its version)."""
    if embedding is None:
        return None
    array = embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding
    return np.asarray(array, dtype=np.float32).tobytes()


def scope_params(scope: Scope, now: datetime) -> dict[str, Any]:
    return {"org": scope.org, "project": scope.project, "now": now}


def fetch(conn: Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def now() -> datetime:
    return datetime.now(UTC)
