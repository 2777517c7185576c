"""Postgres's ``stores.engine.lesson_rows.LessonDialect``: the vector column, and row locks.

A lesson is one row of ``lessons`` (tags a ``text[]``, meta ``jsonb``, its words a generated
``tsvector``), written by ``stores.engine.lesson_rows.SqlLessonTx``; what is Postgres's own is
its vector, a pgvector column searched by HNSW, and that a write transaction locks the rows
it reads, besides the project's advisory lock that ``PostgresLessonStore`` takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from stores.engine import dedup
from stores.engine.lesson_rows import LIVE, SCOPE
from stores.engine.lessons import Lesson, Scope
from stores.postgres.dims import PostgresDims

_NEAREST = text(
    f"SELECT pk, 1 - (embedding <=> :q) AS sim FROM lessons "
    f"WHERE {SCOPE} AND {LIVE} ORDER BY embedding <=> :q LIMIT :k"
)


class PostgresLessonRows:
    """Postgres's own side of one lesson transaction on ``conn``; ``lock`` (a write
    transaction) locks every row it reads."""

    embedding_select = ", embedding"

    def __init__(self, dims: PostgresDims, conn: Connection, scope: Scope, *, lock: bool) -> None:
        self._dims = dims
        self._conn = conn
        self._scope = scope
        self.row_lock = " FOR UPDATE" if lock else ""

    def ensure_dim(self, dim: int) -> None:
        self._dims.check(self._conn, dim)

    def nearest(self, vectors: Sequence[np.ndarray], now: datetime) -> list[list[tuple[int, float]]]:
        if not vectors or self._dims.stored(self._conn) is None:
            return [[] for _ in vectors]
        params = {"org": self._scope.org, "project": self._scope.project, "now": now, "k": dedup.MAX_SIMILAR}
        found = []
        for vec in vectors:
            rows = self._conn.execute(_NEAREST, {**params, "q": vec}).all()
            found.append([(r.pk, float(r.sim)) for r in rows if r.sim >= dedup.CANDIDATE_SIMILARITY])
        return found

    def columns(self, vector: np.ndarray | None) -> dict[str, Any]:
        return {"embedding": vector} if vector is not None else {}

    def written(self, key: int, lesson: Lesson, vector: np.ndarray | None, *, new: bool) -> None:
        """Nothing more: the row holds the vector, and its words are a generated column."""

    def embedding(self, row: Mapping[str, Any]) -> bytes | None:
        """The row's vector as float32 bytes; pgvector hands back a Vector (or an ndarray,
        depending on its version)."""
        found = row["embedding"]
        if found is None:
            return None
        array = found.to_numpy() if hasattr(found, "to_numpy") else found
        return np.asarray(array, dtype=np.float32).tobytes()

    def removed(self, key: int) -> None:
        """Nothing more: the row held everything."""

    def tagged(self, tags: str, count: str) -> str:
        del count  # an array holds all of them or not
        return f"tags @> :{tags}"
