"""The local file's ``LessonDialect``: ``lesson_tags``, ``lessons_fts``, ``lesson_embeddings``;
writes stamp the new revision and deletes leave tombstones, so every process's index catches up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stores.engine import dedup
from stores.engine.lessons import Lesson, Scope
from stores.sqlite import meta
from stores.sqlite.vectors import LocalVectors

if TYPE_CHECKING:
    from sqlite3 import Connection  # sqlean's at run time (``stores.sqlite.db``)


class LocalLessonRows:
    """The file's side of a lesson transaction on ``conn`` (the locked writer or the reader)."""

    row_lock = ""  # BEGIN IMMEDIATE already holds the whole file
    embedding_select = ""  # the vector is in a table of its own (``embedding``)

    def __init__(self, vectors: LocalVectors, conn: Connection, scope: Scope) -> None:
        self._vectors = vectors
        self._conn = conn
        self._scope = scope
        self._rev: int | None = None

    @property
    def rev(self) -> int:
        """This transaction's revision of the file, taken at its first write."""
        if self._rev is None:
            self._rev = meta.bump_rev(self._conn)
        return self._rev

    def ensure_dim(self, dim: int) -> None:
        self._vectors.ensure_dim(self._conn, dim)

    def nearest(self, vectors: Sequence[np.ndarray], now: datetime) -> list[list[tuple[int, float]]]:
        return self._vectors.nearest_many(
            self._conn,
            self._scope,
            vectors,
            now=now.timestamp(),
            k=dedup.MAX_SIMILAR,
            min_similarity=dedup.CANDIDATE_SIMILARITY,
        )

    def columns(self, vector: np.ndarray | None) -> dict[str, Any]:
        return {"rev": self.rev}

    def copy_rows(self, scope: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
        """None: an insert into the file is a call, not a round trip (``LessonDialect.copy_rows``)."""
        del scope, rows

    def written(self, key: int, lesson: Lesson, vector: np.ndarray | None, *, new: bool) -> None:
        conn = self._conn
        if not new:
            conn.execute("DELETE FROM lesson_tags WHERE lesson_pk = ?", (key,))
            conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (key,))
        conn.executemany(
            "INSERT INTO lesson_tags (tag, lesson_pk) VALUES (?, ?)", [(t, key) for t in lesson.tags]
        )
        conn.execute(
            "INSERT INTO lessons_fts (rowid, problem, resolution, context, tags) VALUES (?,?,?,?,?)",
            (key, lesson.problem, lesson.resolution, lesson.context or "", " ".join(lesson.tags)),
        )
        if vector is None:
            return
        if new:
            conn.execute(
                "INSERT INTO lesson_embeddings (pk, embedding) VALUES (?, ?)", (key, vector.tobytes())
            )
        else:
            conn.execute("UPDATE lesson_embeddings SET embedding = ? WHERE pk = ?", (vector.tobytes(), key))

    def embedding(self, row: Mapping[str, Any]) -> bytes | None:
        # A lesson's row comes with its vector, so the vector table is there.
        found = self._conn.execute(
            "SELECT embedding FROM lesson_embeddings WHERE pk = ?", (row["pk"],)
        ).fetchone()
        return found[0] if found else None

    def removed(self, key: int) -> None:
        self._conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (key,))
        if meta.stored_dim(self._conn) is not None:
            self._conn.execute("DELETE FROM lesson_embeddings WHERE pk = ?", (key,))
        self._conn.execute(
            "INSERT OR REPLACE INTO lesson_tombstones (pk, rev) VALUES (?, ?)", (key, self.rev)
        )

    def tagged(self, tags: str, count: str) -> str:
        return (
            "pk IN (SELECT lesson_pk FROM lesson_tags WHERE tag IN (SELECT value FROM json_each(:"
            f"{tags})) GROUP BY lesson_pk HAVING count(*) = :{count})"
        )
