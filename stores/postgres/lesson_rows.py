"""Postgres's ``LessonDialect``: a pgvector column searched by HNSW, and write transactions
locking rows they read (besides the project's advisory lock)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from stores.engine import dedup
from stores.engine.lesson_rows import COLUMNS, LIVE, SCOPE
from stores.engine.lessons import Lesson, Scope
from stores.postgres.dims import PostgresDims

# Every vector of a batch in one round trip: the nearest ``k`` of each, by the HNSW index.
_NEAREST = text(
    "SELECT q.i, n.pk, n.sim FROM unnest(CAST(CAST(:qs AS text[]) AS vector[])) WITH ORDINALITY AS q(v, i) "
    "CROSS JOIN LATERAL (SELECT pk, 1 - (embedding <=> q.v) AS sim FROM lessons "
    f"WHERE {SCOPE} AND {LIVE} ORDER BY embedding <=> q.v LIMIT :k) AS n"
)


class PostgresLessonRows:
    """Postgres's side of a lesson transaction; ``lock`` locks every row read."""

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
        found: list[list[tuple[int, float]]] = [[] for _ in vectors]
        texts = ["[" + ",".join(map(repr, vec.tolist())) + "]" for vec in vectors]
        for r in self._conn.execute(_NEAREST, {**params, "qs": texts}):
            if r.sim >= dedup.CANDIDATE_SIMILARITY:
                found[r.i - 1].append((r.pk, float(r.sim)))
        return found

    def columns(self, vector: np.ndarray | None) -> dict[str, Any]:
        return {"embedding": vector} if vector is not None else {}

    def copy_rows(self, scope: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """COPY into the connection's temporary table, then ``INSERT ... SELECT``: Postgres refuses
        a COPY into ``lessons``, which would skip its RLS."""
        names = ["id", "org_id", "project", *(name for name in rows[0] if name != "id")]
        columns = ", ".join(names)  # the engine's column names, never user text
        typed = columns.replace("embedding", "CAST(embedding AS vector) AS embedding")  # any dimension
        self._conn.execute(
            text(
                f"CREATE TEMP TABLE IF NOT EXISTS lore_copy ON COMMIT DELETE ROWS AS SELECT {typed} FROM lessons LIMIT 0"
            )
        )
        raw = self._conn.connection.driver_connection
        assert raw is not None
        with raw.cursor() as cursor, cursor.copy(f"COPY lore_copy ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(
                    [row["id"], scope["org"], scope["project"], *(row[name] for name in names[3:])]
                )
        inserted = self._conn.execute(
            text(f"INSERT INTO lessons ({columns}) SELECT {columns} FROM lore_copy RETURNING {COLUMNS}")
        )
        return [dict(row._mapping) for row in inserted]

    def written(self, key: int, lesson: Lesson, vector: np.ndarray | None, *, new: bool) -> None:
        """Nothing more: the row holds the vector, and its words are a generated column."""

    def embedding(self, row: Mapping[str, Any]) -> bytes | None:
        """float32 bytes, from pgvector's Vector or ndarray (by version)."""
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
