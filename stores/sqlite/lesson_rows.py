"""``stores.engine.lesson_rules.LessonTx`` on the local SQLite file: the SQL of a lesson's rows.

A lesson is a row of ``lessons`` (tags and meta as JSON text, times as fixed-width UTC
text), its tags in ``lesson_tags``, its words in ``lessons_fts`` and its vector in
``lesson_embeddings``; every write stamps the rows it touches with the file's new revision
and a delete leaves a tombstone, so the in-memory vector index of every process
(``stores.sqlite.vectors``) catches up on its next read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from stores.engine import dedup
from stores.engine.lesson_tx import ModelChecks, Near, Restorer, Row, lesson_of
from stores.engine.lessons import Lesson, Scope
from stores.engine.project_rows import SqlProjectTx
from stores.sqlite import meta
from stores.sqlite.db import Connection, parse_ts
from stores.sqlite.db import format_ts as ts
from stores.sqlite.db import utc_now as now
from stores.sqlite.models import LocalModelRecords
from stores.sqlite.sql import LocalSqlTx
from stores.sqlite.vectors import LocalVectors

COLUMNS = (
    "pk, id, project, problem, resolution, context, tags, confidence, source, "
    "created_at, updated_at, expires_at, upvotes, downvotes, meta"
)
LIVE = "(expires_at IS NULL OR expires_at > ?)"
_CHUNK = 500  # keys bound in one statement


class LocalLessonTx(ModelChecks):
    """One project's lessons inside a transaction the caller holds on ``conn`` (the
    writer's, under the store's write lock, or the reader's)."""

    def __init__(
        self, models: LocalModelRecords, vectors: LocalVectors, conn: Connection, scope: Scope
    ) -> None:
        super().__init__(models, conn)
        self.vectors = vectors
        self.conn = conn
        self.scope = scope
        self.now = now()
        self._rev: int | None = None

    @property
    def rev(self) -> int:
        """This transaction's revision of the file, taken at its first write."""
        if self._rev is None:
            self._rev = meta.bump_rev(self.conn)
        return self._rev

    def ensure_dim(self, dim: int) -> None:
        self.vectors.ensure_dim(self.conn, dim)

    def nearest(self, vectors: Sequence[np.ndarray]) -> list[list[Near]]:
        found = self.vectors.nearest_many(
            self.conn,
            self.scope,
            vectors,
            now=self.now.timestamp(),
            k=dedup.MAX_SIMILAR,
            min_similarity=dedup.CANDIDATE_SIMILARITY,
        )
        keys = list({pk for hits in found for pk, _ in hits})
        texts: dict[int, tuple[str, tuple[str, str, str | None]]] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            sql = f"SELECT pk, id, problem, resolution, context FROM lessons WHERE pk IN ({','.join('?' * len(chunk))})"
            texts.update((pk, (i, (p, r, c))) for pk, i, p, r, c in self.conn.execute(sql, chunk))
        return [
            [Near(pk, sim, *texts[pk]) for pk, sim in sorted(hits, key=lambda h: (-h[1], h[0]))]
            for hits in found
        ]

    def by_id(self, lesson_id: str, *, live: bool = True, embedding: bool = True) -> Row | None:
        sql = f"SELECT {COLUMNS} FROM lessons WHERE id = ? AND org_id = ? AND project = ?"
        params: list[Any] = [lesson_id, self.scope.org, self.scope.project]
        if live:
            sql += f" AND {LIVE}"
            params.append(ts(self.now))
        rows = fetch(self.conn, sql, params)
        if not rows:
            return None
        pk = rows[0]["pk"]
        return Row(pk, to_lesson(rows[0]), self._embedding(pk) if embedding else None)

    def insert(self, lesson: Lesson, vector: np.ndarray) -> Row:
        scope = self.scope
        pk = self.conn.execute(
            "INSERT INTO lessons (id, org_id, project, problem, resolution, context, tags, confidence, source, "
            "created_at, updated_at, expires_at, upvotes, downvotes, meta, rev) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING pk",
            (lesson.id, scope.org, scope.project, *_fields(lesson), self.rev),
        ).fetchone()[0]
        self._index_words(pk, lesson)
        self.conn.execute(
            "INSERT INTO lesson_embeddings (pk, embedding) VALUES (?, ?)", (pk, vector.tobytes())
        )
        return Row(pk, self._lesson(pk), vector.tobytes())

    def write(self, key: int, lesson: Lesson, vector: np.ndarray | None) -> Lesson:
        self.conn.execute(
            "UPDATE lessons SET problem = ?, resolution = ?, context = ?, tags = ?, confidence = ?, "
            "source = ?, created_at = ?, updated_at = ?, expires_at = ?, upvotes = ?, downvotes = ?, "
            "meta = ?, rev = ? WHERE pk = ?",
            (*_fields(lesson), self.rev, key),
        )
        self.conn.execute("DELETE FROM lesson_tags WHERE lesson_pk = ?", (key,))
        self.conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (key,))
        self._index_words(key, lesson)
        if vector is not None:
            self.conn.execute(
                "UPDATE lesson_embeddings SET embedding = ? WHERE pk = ?", (vector.tobytes(), key)
            )
        return self._lesson(key)

    def add_vote(self, lesson_id: str, up: bool) -> Lesson | None:
        column = "upvotes" if up else "downvotes"
        # The column name is one of two literals above, never user text.
        found = self.conn.execute(
            f"UPDATE lessons SET {column} = {column} + 1, rev = ? "
            f"WHERE id = ? AND org_id = ? AND project = ? AND {LIVE} RETURNING pk",
            (self.rev, lesson_id, self.scope.org, self.scope.project, ts(self.now)),
        ).fetchone()
        return self._lesson(found[0]) if found else None

    def remove(self, key: int) -> None:
        self.conn.execute("DELETE FROM lessons WHERE pk = ?", (key,))
        self.conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (key,))
        if meta.stored_dim(self.conn) is not None:
            self.conn.execute("DELETE FROM lesson_embeddings WHERE pk = ?", (key,))
        self.conn.execute("INSERT OR REPLACE INTO lesson_tombstones (pk, rev) VALUES (?, ?)", (key, self.rev))

    def project(self, restore: Restorer) -> SqlProjectTx:
        return SqlProjectTx(LocalSqlTx(self.conn), self.scope, restore)

    def _lesson(self, pk: int) -> Lesson:
        return to_lesson(fetch(self.conn, f"SELECT {COLUMNS} FROM lessons WHERE pk = ?", [pk])[0])

    def _embedding(self, pk: int) -> bytes | None:
        # A lesson's row comes with its vector, so the vector table is there.
        found = self.conn.execute("SELECT embedding FROM lesson_embeddings WHERE pk = ?", (pk,)).fetchone()
        return found[0] if found else None

    def _index_words(self, pk: int, lesson: Lesson) -> None:
        """The lesson's tags and full-text entry (the caller removed any old ones)."""
        self.conn.executemany(
            "INSERT INTO lesson_tags (tag, lesson_pk) VALUES (?, ?)", [(t, pk) for t in lesson.tags]
        )
        self.conn.execute(
            "INSERT INTO lessons_fts (rowid, problem, resolution, context, tags) VALUES (?,?,?,?,?)",
            (pk, lesson.problem, lesson.resolution, lesson.context or "", " ".join(lesson.tags)),
        )


def _fields(lesson: Lesson) -> tuple[Any, ...]:
    """The lesson's columns from ``problem`` to ``meta``, as the file stores them."""
    return (
        lesson.problem,
        lesson.resolution,
        lesson.context,
        json.dumps(list(lesson.tags)),
        lesson.confidence,
        lesson.source,
        ts(lesson.created_at),
        ts(lesson.updated_at),
        ts(lesson.expires_at) if lesson.expires_at else None,
        lesson.upvotes,
        lesson.downvotes,
        json.dumps(dict(lesson.meta)),
    )


def fetch(conn: Connection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def decoded(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its tags and times as Python values (``lesson_engine.lesson_of``); meta stays
    text until a lesson is made of it."""
    return {
        **row,
        "tags": json.loads(row["tags"]),
        "created_at": parse_ts(row["created_at"]),
        "updated_at": parse_ts(row["updated_at"]),
        "expires_at": parse_ts(row["expires_at"]) if row["expires_at"] else None,
    }


def to_lesson(row: dict[str, Any]) -> Lesson:
    return lesson_of(decoded(row))
