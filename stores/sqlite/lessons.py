"""Lessons in a local SQLite file: rows, FTS5 for words, an in-memory ``VectorIndex``.

One connection writes (locked, ``BEGIN IMMEDIATE``) and one reads, so a process never contends
with itself. Writes bump ``lore_meta.rev`` and stamp their rows (deletes leave tombstones), and
the index refreshes newer rows, so other processes' writes show on the next recall."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stores import deadline
from stores.engine import dedup, ranking
from stores.engine.activity import ActivityBounds
from stores.engine.activity_rows import ActivityRecords
from stores.engine.embedding_model import ModelRecords
from stores.engine.keys import KeyStore
from stores.engine.lesson_rows import COLUMNS, RolledBack, decoded
from stores.engine.lesson_rules import CallCounts, NoticeFeed, lexical_text
from stores.engine.lessons import Lesson, RecallQuery, Scope, WordMatches
from stores.engine.sql import SqlTx
from stores.engine.terms import prepare
from stores.errors import UnavailableError
from stores.sqlite import meta
from stores.sqlite.connections import LocalConnections
from stores.sqlite.db import format_ts as _ts
from stores.sqlite.db import write_transaction
from stores.sqlite.keys import LocalKeyDb
from stores.sqlite.models import LocalModelDb
from stores.sqlite.sql import LocalSqlTx
from stores.sqlite.vectors import LocalVectors

if TYPE_CHECKING:
    from sqlite3 import Connection  # sqlean's at run time (``stores.sqlite.db``)

# How long a write probe (``probe_write``) waits for the writer and the file's lock.
PROBE_WAIT_S = 4.0


_LIVE = "(expires_at IS NULL OR expires_at > ?)"
# A scope's newest live lessons, whose mean is its ``ranking.anchor``.
_NEWEST = f"SELECT pk FROM lessons WHERE org_id = ? AND project = ? AND {_LIVE} ORDER BY id DESC LIMIT ?"


class LocalLessons:
    """``stores.engine.lesson_rules.LessonBackend`` on one SQLite file: ``SqlStore``'s leaf."""

    # One process serves a file: it counts calls in memory and tells its own subscribers.
    call_counts: CallCounts | None = None
    notices: NoticeFeed | None = None
    # Any write drops the reader's page cache, so held entries are written with the next one.
    rides_activity = True

    def __init__(
        self,
        path: Path | str,
        *,
        ranking_params: ranking.RankingParams | None = None,
        activity_bounds: ActivityBounds | None = None,
    ) -> None:
        self.path = Path(path)
        self.ranking = ranking_params or ranking.RankingParams()
        self.conns = LocalConnections(path)
        key_db = LocalKeyDb(self.conns)
        self.activity = ActivityRecords(key_db, activity_bounds)
        # Orgs and API keys on this same file, sharing these connections and locks.
        self.keys = KeyStore(key_db, self.activity.log)
        self.models = ModelRecords(LocalModelDb(self.conns))
        self._vectors = LocalVectors()

    @contextlib.contextmanager
    def writing(self, scope: Scope, dim: int | None) -> Iterator[LocalLessonRows]:
        """The write lock and ``BEGIN IMMEDIATE``; the vector table made for the first vector."""
        with self.conns.writing() as conn:
            if dim is not None:
                self._vectors.ensure_dim(conn, dim)
            yield LocalLessonRows(self._vectors, conn, scope)

    @contextlib.contextmanager
    def reading(self, scope: Scope, *, lagging: bool = False) -> Iterator[LocalLessonRows]:
        with self.conns.reading() as conn:
            yield LocalLessonRows(self._vectors, conn, scope)

    def candidates(
        self, scope: Scope, query: RecallQuery, words: WordMatches, vector: Callable[[], np.ndarray], k: int
    ) -> list[dict[str, Any]]:
        # While the query embeds: the word matches' rows (their words cached for ranking), the
        # scope's anchor sample, and the vectors of both; the reader is free again for the wait.
        with self.conns.reading() as conn:
            self.models.check(meta.generation(conn))
            rows = {row["pk"]: row for row in _candidate_rows(conn, scope, query.tags, words.keys, words.now)}
            size = ranking.ANCHOR_SAMPLE if self.ranking.centring else 0
            sample = [pk for (pk,) in conn.execute(_NEWEST, (scope.org, scope.project, _ts(words.now), size))]
            held = self._vectors.vectors(conn, {*words.keys, *sample})
        prepare([lexical_text(row) for row in rows.values()], self.ranking)
        vec = vector()
        with self.conns.reading() as conn:
            self.models.check(meta.generation(conn))
            filters: dict[str, Any] = {"now": words.now.timestamp(), "min_confidence": query.min_confidence}
            filters["allowed"] = self._tagged_pks(conn, scope, query.tags) if query.tags else None
            hits, stored = self._vectors.search(conn, scope, vec, k, **filters)
            more = [pk for pk, _ in hits if pk not in rows]
            rows |= {row["pk"]: row for row in _candidate_rows(conn, scope, query.tags, more, words.now)}
        stored |= held
        found = [pk for pk in rows if pk in stored]
        nearest = dict(hits)
        sims: dict[int, float | None] = dict(nearest)
        if self.ranking.centring and found:  # seen from the anchor, the mean of the sample's vectors
            sampled = [stored[pk] for pk in sample if pk in stored]
            origin = ranking.anchor(np.array(sampled)) if sampled else np.zeros_like(vec)
            centred = ranking.centred_similarities(vec, np.array([stored[pk] for pk in found]), origin)
            sims = dict(zip(found, centred, strict=True))
        elif missing := [pk for pk in found if pk not in sims]:  # word matches' own
            sims |= zip(missing, (np.array([stored[pk] for pk in missing]) @ vec).tolist(), strict=True)
        return [{**row, "sim": sims.get(pk), "near": pk in nearest} for pk, row in rows.items()]

    def bulk(self, org: str, coming: int) -> contextlib.AbstractContextManager[int]:
        # Its exact search keeps up, so no index is rebuilt; one writer, so one project at a time.
        return contextlib.nullcontext(1)

    def ensure_dim(self, dim: int) -> None:
        with self.conns.writing() as conn:
            self._vectors.ensure_dim(conn, dim)

    def probe_write(self) -> None:
        """The writer within ``PROBE_WAIT_S``, then a rolled-back update. A write within its
        deadline holding the writer is busy, not down: the probe passes at once, so heavy work
        never turns ``/healthz`` to 503; one past its deadline is stuck."""
        lock = self.conns.write_lock
        if not lock.acquire(blocking=False):
            until = self.conns.writer_until
            if until is not None and time.monotonic() < until + PROBE_WAIT_S:
                return
            if not lock.acquire(timeout=PROBE_WAIT_S):
                raise UnavailableError(
                    f"The Lore database's writer in this server has been taken for over {PROBE_WAIT_S:.0f} s."
                )
        try:
            with (
                suppress(RolledBack),
                deadline.limit(PROBE_WAIT_S),
                write_transaction(self.conns.writer) as conn,
            ):
                conn.execute("UPDATE lore_meta SET value = value WHERE key = 'rev'")
                raise RolledBack
        except deadline.DeadlineExceeded:
            raise UnavailableError(
                f"The Lore database's write lock has been held by another process for over {PROBE_WAIT_S:.0f} s."
            ) from None
        finally:
            lock.release()

    def close(self) -> None:
        self.activity.close()
        self.conns.close()

    def word_keys(
        self, scope: Scope, query: RecallQuery, terms: list[str], k: int, now: datetime
    ) -> list[int]:
        """Lessons with the rarest query words, best bm25 over ``candidate_terms`` first."""
        with self.conns.reading() as conn:
            postings = self._postings(conn, terms)
            chosen, ordering = ranking.full_text_terms(query.text, terms, postings, self.ranking)
            if not chosen:
                return []
            match = _any_of(chosen)
            if len(ordering) > len(chosen):
                match = f"({match}) AND ({_any_of(ordering)})"
            # Each match's scope from the narrow ``lessons_pk_scope`` first, so bm25 (the costly part:
            # 20k matches of a common word took 40 ms at 250k) weighs only the scope's live matches.
            sql = (
                "SELECT l.pk FROM lessons_fts AS f CROSS JOIN lessons AS l INDEXED BY lessons_pk_scope "
                "ON l.pk = f.rowid WHERE lessons_fts MATCH ? AND l.org_id = ? AND l.project = ? "
                f"AND {_LIVE.replace('expires_at', 'l.expires_at')} AND l.confidence >= ?"
            )
            params: list[Any] = [match, scope.org, scope.project, _ts(now), query.min_confidence]
            if query.tags:
                sql += f" AND {_tag_filter(len(query.tags), 'l.pk')}"
                params.extend([*query.tags, len(query.tags)])
            sql += " ORDER BY bm25(lessons_fts), l.pk LIMIT ?"
            params.append(k)
            return [row[0] for row in conn.execute(sql, params)]

    def _postings(self, conn: Connection, terms: list[str]) -> dict[str, float]:
        """Each term's matches, counted just past the budget (past it a term is common anyway)."""
        if not terms:
            return {}
        count = "(SELECT count(*) FROM (SELECT 1 FROM lessons_fts WHERE lessons_fts MATCH ? LIMIT ?))"
        cap = self.ranking.postings_budget + 1
        row = conn.execute(
            f"SELECT {', '.join([count] * len(terms))}", [x for t in terms for x in (f'"{t}"', cap)]
        ).fetchone()
        return dict(zip(terms, row, strict=True))

    def _tagged_pks(self, conn: Connection, scope: Scope, tags: tuple[str, ...]) -> set[int]:
        """Lessons with all ``tags`` in any project: the index searches the scope's alone, and
        looking each tagged row up in ``lessons`` took 40 ms for a tag of 6,000 rows at 250k."""
        sql = f"SELECT lesson_pk FROM lesson_tags WHERE tag IN ({','.join('?' * len(tags))}) GROUP BY lesson_pk HAVING count(*) = ?"
        return {row[0] for row in conn.execute(sql, [*tags, len(tags)])}


def _any_of(terms: list[str]) -> str:
    """An FTS5 query for lessons with any of ``terms`` (no quotes in terms: each is a phrase)."""
    return " OR ".join(f'"{t}"' for t in terms)


def _tag_filter(n: int, pk_column: str = "pk") -> str:
    """Each candidate's own tags counted (one index probe), not every lesson with the tags grouped."""
    marks = ",".join("?" * n)
    return f"(SELECT count(*) FROM lesson_tags WHERE lesson_pk = {pk_column} AND tag IN ({marks})) = ?"


def _candidate_rows(
    conn: Connection, scope: Scope, tags: tuple[str, ...], keys: Collection[int], now: datetime
) -> list[dict[str, Any]]:
    """The live rows of ``keys`` in the scope, with all of ``tags``, decoded."""
    if not keys:
        return []
    marks = ",".join("?" * len(keys))
    sql = f"SELECT {COLUMNS} FROM lessons WHERE pk IN ({marks}) AND +org_id = ? AND +project = ? AND {_LIVE}"
    params: list[Any] = [*keys, scope.org, scope.project, _ts(now)]
    if tags:
        sql += f" AND {_tag_filter(len(tags))}"
        params.extend([*tags, len(tags)])
    local = LocalSqlTx(conn)
    return [decoded(local, row) for row in local.rows(sql, params)]


_COPIED = 500  # rows a statement in ``copy_rows``: 9,000 parameters, under SQLite's 32,766


class LocalLessonRows:
    """The file's side of a lesson transaction on ``conn`` (the locked writer or the reader)."""

    row_lock = ""  # BEGIN IMMEDIATE already holds the whole file
    embedding_select = ""  # the vector is in a table of its own (``embedding``)

    def __init__(self, vectors: LocalVectors, conn: Connection, scope: Scope) -> None:
        self.sql: SqlTx = LocalSqlTx(conn)
        self.project_sql: SqlTx = self.sql
        self._vectors, self._conn, self._scope = vectors, conn, scope
        self._rev: int | None = None

    def generation(self) -> int:
        return meta.generation(self._conn)

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
            k=dedup.MAX_SIMILAR,
            now=now.timestamp(),
            min_similarity=dedup.CANDIDATE_SIMILARITY,
        )

    def columns(self, vector: np.ndarray | None) -> dict[str, Any]:
        return {"rev": self.rev}

    def copy_rows(self, scope: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """Multi-row ``INSERT ... RETURNING``s of ``_COPIED`` rows: a statement a row cost an
        import more than its writes. (Columns are the engine's names, never user text.)"""
        names = ["org_id", "project", *rows[0]]
        marks = "(" + ", ".join("?" * len(names)) + ")"
        keys: dict[str, int] = {}
        for start in range(0, len(rows), _COPIED):
            chunk = rows[start : start + _COPIED]
            values = [v for row in chunk for v in (scope["org"], scope["project"], *row.values())]
            sql = f"INSERT INTO lessons ({', '.join(names)}) VALUES {', '.join([marks] * len(chunk))}"
            keys.update(self._conn.execute(f"{sql} RETURNING id, pk", values).fetchall())
        return keys

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
        if vector is not None:
            conn.execute(
                "REPLACE INTO lesson_embeddings (pk, embedding) VALUES (?, ?)", (key, vector.tobytes())
            )

    def embedding(self, row: Mapping[str, Any]) -> bytes | None:
        # A lesson's row comes with its vector, so the vector table is there.
        found = self.sql.rows("SELECT embedding FROM lesson_embeddings WHERE pk = :pk", {"pk": row["pk"]})
        return found[0]["embedding"] if found else None

    def removed(self, key: int) -> None:
        conn = self._conn
        conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (key,))
        if meta.stored_dim(conn) is not None:
            conn.execute("DELETE FROM lesson_embeddings WHERE pk = ?", (key,))
        conn.execute("INSERT OR REPLACE INTO lesson_tombstones (pk, rev) VALUES (?, ?)", (key, self.rev))

    def tagged(self, tags: str, count: str) -> str:
        return (
            "pk IN (SELECT lesson_pk FROM lesson_tags WHERE tag IN (SELECT value FROM json_each(:"
            f"{tags})) GROUP BY lesson_pk HAVING count(*) = :{count})"
        )
