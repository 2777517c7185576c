"""Lessons in a local SQLite file: rows, FTS5 for words, an in-memory ``VectorIndex``.

One connection writes (locked, ``BEGIN IMMEDIATE``) and one reads, so a process never contends
with itself. Writes bump ``lore_meta.rev`` and stamp their rows (deletes leave tombstones), and
the index refreshes newer rows, so other processes' writes show on the next recall."""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stores import deadline
from stores.engine import curation, ranking
from stores.engine.activity import (
    ActivityBounds,
    ActivityNote,
    ActivityPage,
    ActivityQuery,
    RecallStats,
    StalePage,
)
from stores.engine.activity_rows import ActivityRecords
from stores.engine.embedding_model import ModelRecords
from stores.engine.keys import KeyStore
from stores.engine.lesson_rows import COLUMNS as _COLUMNS
from stores.engine.lesson_rows import LessonReads, SqlLessonTx, count_live, decoded
from stores.engine.lesson_rules import LessonWrites
from stores.engine.lesson_tx import ModelChecks, check_dims
from stores.engine.lessons import RecallQuery, Scope, ScoredLesson, WordMatches
from stores.engine.recall_scoring import TwoStepRecall, scored_lessons
from stores.engine.vectors import unit_vector
from stores.errors import UnavailableError
from stores.sqlite import meta
from stores.sqlite.connections import LocalConnections
from stores.sqlite.db import format_ts as _ts
from stores.sqlite.db import utc_now as _now
from stores.sqlite.db import write_transaction
from stores.sqlite.keys import LocalKeyDb
from stores.sqlite.lesson_rows import LocalLessonRows
from stores.sqlite.models import LocalModelDb
from stores.sqlite.sql import LocalSqlTx
from stores.sqlite.vectors import LocalVectors

if TYPE_CHECKING:
    from sqlite3 import Connection  # sqlean's at run time (``stores.sqlite.db``)

# How long a write probe (``probe_write``) waits for the writer and the file's lock.
PROBE_WAIT_S = 4.0


class _ProbeDone(Exception):
    """Raised inside the probe's transaction so that it rolls back."""


_LIVE = "(expires_at IS NULL OR expires_at > ?)"
# Lexical candidates fetched before scoping, so one busy project cannot crowd out another.
_FTS_OVERSAMPLE = 4


class LocalLessonStore(LessonReads, LessonWrites, TwoStepRecall):
    """``stores.Store`` on one SQLite file."""

    def __init__(
        self,
        path: Path | str,
        *,
        ranking_params: ranking.RankingParams | None = None,
        activity_bounds: ActivityBounds | None = None,
    ) -> None:
        self.path = Path(path)
        self._ranking = ranking_params or ranking.RankingParams()
        self._conns = LocalConnections(path)
        self._key_db = LocalKeyDb(self._conns)
        self._activity = ActivityRecords(self._key_db, activity_bounds)
        # The connections and the write lock, by their old names (tests hold them).
        self._writer, self._reader = self._conns.writer, self._conns.reader
        self._write_lock = self._conns.write_lock
        self._vectors = LocalVectors()
        self._models = ModelRecords(LocalModelDb(self._conns))

    def _word_keys(
        self, scope: Scope, query: RecallQuery, terms: builtins.list[str], k: int, now: datetime
    ) -> builtins.list[int]:
        with self._conns.reading() as conn:
            return self._lexical_candidates(conn, scope, query, terms, k, now)

    def rank(self, scope: Scope, query: RecallQuery, words: WordMatches) -> builtins.list[ScoredLesson]:
        now, terms, lexical_hits = words.now, list(words.terms), words.keys
        k = ranking.candidate_count(query.limit, self._ranking)
        vec = unit_vector(query.needs_vector())
        with self._conns.reading() as conn:
            self._models.check(meta.generation(conn))
            allowed = self._tagged_pks(conn, scope, query.tags) if query.tags else None
            vector_hits: dict[int, float | None] = dict(
                self._vectors.search(
                    conn,
                    scope,
                    vec,
                    k,
                    now=now.timestamp(),
                    min_confidence=query.min_confidence,
                    allowed=allowed,
                )
            )
            candidates = vector_hits.keys() | set(lexical_hits)
            if not candidates:
                return []
            rows = _candidate_rows(conn, scope, query.tags, candidates, now)
            nearest = {r["id"] for r in rows if r["pk"] in vector_hits}
            if self._ranking.centring:
                vector_hits = self._centred_similarities(conn, scope, vec, [r["pk"] for r in rows], now)
            else:
                missing = [r["pk"] for r in rows if r["pk"] not in vector_hits]
                if missing:
                    vector_hits.update(self._vectors.similarities(missing, vec))
        found = [
            {
                **decoded(LocalSqlTx(conn), row),
                "sim": vector_hits.get(row["pk"]),
                "near": row["id"] in nearest,
            }
            for row in rows
        ]
        return scored_lessons(found, query, terms, now, self._ranking)

    def count(self, org: str, project: str | None = None) -> int:
        with self._conns.reading() as conn:
            return count_live(LocalSqlTx(conn), org, project, _now())

    def ensure_dim(self, dim: int) -> None:
        with self._conns.writing() as conn:
            self._vectors.ensure_dim(conn, dim)

    # -- the transactions of stores.engine.lesson_rules -----------------------------------

    @contextlib.contextmanager
    def _lesson_writer(self, scope: Scope, vectors: Sequence[np.ndarray]) -> Iterator[SqlLessonTx]:
        """The write lock and ``BEGIN IMMEDIATE``; the vector table made for the first vector."""
        with self._conns.writing() as conn:
            if vectors:
                check_dims(vectors, self._vectors.ensure_dim(conn, vectors[0].shape[0]))
            with self._activity.riding(LocalSqlTx(conn)):
                yield self._tx(conn, scope)

    @contextlib.contextmanager
    def _lesson_reader(self, scope: Scope) -> Iterator[SqlLessonTx]:
        with self._conns.reading() as conn:
            yield self._tx(conn, scope)

    def _tx(self, conn: Connection, scope: Scope) -> SqlLessonTx:
        rows = LocalLessonRows(self._vectors, conn, scope)
        checks = ModelChecks(self._models, lambda: meta.generation(conn))
        return SqlLessonTx(LocalSqlTx(conn), scope, _now(), rows, checks, activity=self._activity.log)

    # -- the activity log and curation (``stores.engine.activity_rows``, ``curation``) -----

    def append_activity(self, scope: Scope, note: ActivityNote) -> str:
        return self._activity.append(scope, note)

    def activity(self, scope: Scope, query: ActivityQuery) -> ActivityPage:
        return self._activity.page(scope, query)

    def recall_stats(self, scope: Scope, lesson_ids: builtins.list[str]) -> dict[str, RecallStats]:
        return self._activity.recall_stats(scope, lesson_ids)

    def stale_lessons(self, scope: Scope, before: datetime, limit: int, cursor: str | None) -> StalePage:
        return self._activity.stale_lessons(scope, before, limit, cursor)

    def duplicate_pairs(self, scope: Scope, threshold: float) -> builtins.list[curation.Pair]:
        return curation.duplicate_pairs(self._lesson_reader(scope), threshold)

    def keep_pair(self, scope: Scope, a: str, b: str) -> None:
        curation.keep_pair(self._lesson_writer(scope, []), a, b)

    def probe_write(self) -> None:
        """The writer within ``PROBE_WAIT_S``, then a rolled-back update. A write within its
        deadline holding the writer is busy, not down: the probe passes at once, so heavy work
        never turns ``/healthz`` to 503; one past its deadline is stuck."""
        if not self._write_lock.acquire(blocking=False):
            until = self._conns.writer_until
            if until is not None and time.monotonic() < until + PROBE_WAIT_S:
                return
            if not self._write_lock.acquire(timeout=PROBE_WAIT_S):
                raise UnavailableError(
                    f"The Lore database's writer in this server has been taken for over {PROBE_WAIT_S:.0f} s."
                )
        try:
            with deadline.limit(PROBE_WAIT_S), write_transaction(self._writer) as conn:
                conn.execute("UPDATE lore_meta SET value = value WHERE key = 'rev'")
                raise _ProbeDone
        except _ProbeDone:
            pass
        except deadline.DeadlineExceeded:
            raise UnavailableError(
                f"The Lore database's write lock has been held by another process for over {PROBE_WAIT_S:.0f} s."
            ) from None
        finally:
            self._write_lock.release()

    @property
    def call_counts(self) -> None:
        """``stores.Store.call_counts``: none; one process serves a file, and counts in memory."""
        return None

    @property
    def notices(self) -> None:
        """``stores.Store.notices``: none; one process serves a file, and tells its own subscribers."""
        return None

    def close(self) -> None:
        self._activity.close()
        self._conns.close()

    def _centred_similarities(
        self, conn: Connection, scope: Scope, vec: np.ndarray, pks: builtins.list[int], now: datetime
    ) -> dict[int, float | None]:
        """The candidates' similarity to the query seen from the scope's ``ranking.anchor``."""
        if not pks:
            return {}
        sample = [
            row[0]
            for row in conn.execute(
                f"SELECT pk FROM lessons WHERE org_id = ? AND project = ? AND {_LIVE} ORDER BY id DESC LIMIT ?",
                (scope.org, scope.project, _ts(now), ranking.ANCHOR_SAMPLE),
            )
        ]
        held = self._vectors.vectors(sample)
        candidates = self._vectors.vectors(pks)
        if held is None or candidates is None:
            return {}
        origin, (found, vectors) = ranking.anchor(held[1]), candidates
        return dict(zip(found, ranking.centred_similarities(vec, vectors, origin), strict=True))

    def _lexical_candidates(
        self,
        conn: Connection,
        scope: Scope,
        query: RecallQuery,
        terms: builtins.list[str],
        k: int,
        now: datetime,
    ) -> builtins.list[int]:
        """Lessons with the rarest query words, best bm25 over ``candidate_terms`` first."""
        chosen, ordering = ranking.full_text_terms(
            query.text, terms, self._postings(conn, terms), self._ranking
        )
        if not chosen:
            return []
        match = _any_of(chosen)
        if len(ordering) > len(chosen):
            match = f"({match}) AND ({_any_of(ordering)})"
        sql = (
            "SELECT l.pk FROM (SELECT rowid, rank FROM lessons_fts WHERE lessons_fts MATCH ? "
            "ORDER BY rank LIMIT ?) AS f JOIN lessons AS l ON l.pk = f.rowid "
            f"WHERE +l.org_id = ? AND +l.project = ? AND {_LIVE.replace('expires_at', 'l.expires_at')} "
            "AND l.confidence >= ?"
        )
        params: list[Any] = [
            match,
            k * _FTS_OVERSAMPLE,
            scope.org,
            scope.project,
            _ts(now),
            query.min_confidence,
        ]
        if query.tags:
            sql += f" AND {_tag_filter(len(query.tags), 'l.pk')}"
            params.extend([*query.tags, len(query.tags)])
        sql += " ORDER BY f.rank LIMIT ?"
        params.append(k)
        return [row[0] for row in conn.execute(sql, params)]

    # (Unary + keeps SQLite off the scope index, which scanned the project, not the candidates.)

    def _postings(self, conn: Connection, terms: builtins.list[str]) -> dict[str, float]:
        """Each term's matches, counted just past the budget (past it a term is common anyway)."""
        if not terms:
            return {}
        count = "(SELECT count(*) FROM (SELECT 1 FROM lessons_fts WHERE lessons_fts MATCH ? LIMIT ?))"
        cap = self._ranking.postings_budget + 1
        row = conn.execute(
            f"SELECT {', '.join([count] * len(terms))}", [x for t in terms for x in (f'"{t}"', cap)]
        ).fetchone()
        return dict(zip(terms, row, strict=True))

    def _tagged_pks(self, conn: Connection, scope: Scope, tags: tuple[str, ...]) -> set[int]:
        marks = ",".join("?" * len(tags))
        rows = conn.execute(
            f"SELECT t.lesson_pk FROM lesson_tags AS t JOIN lessons AS l ON l.pk = t.lesson_pk "
            f"WHERE t.tag IN ({marks}) AND l.org_id = ? AND l.project = ? "
            "GROUP BY t.lesson_pk HAVING count(*) = ?",
            [*tags, scope.org, scope.project, len(tags)],
        )
        return {row[0] for row in rows}

    # -- the embedding model -------------------------------------------------------

    @property
    def models(self) -> ModelRecords:
        """The model that made this file's vectors, and re-embedding (``stores.engine.embedding_model``)."""
        return self._models

    # -- orgs and api keys ---------------------------------------------------------

    def _key_store(self) -> KeyStore:
        """Orgs and API keys on this same file, sharing this store's connections and locks."""
        return KeyStore(self._key_db, self._activity.log)


def _any_of(terms: list[str]) -> str:
    """An FTS5 query for lessons with any of ``terms`` (no quotes in terms: each is a phrase)."""
    return " OR ".join(f'"{t}"' for t in terms)


def _tag_filter(n: int, pk_column: str = "pk") -> str:
    marks = ",".join("?" * n)
    return f"{pk_column} IN (SELECT lesson_pk FROM lesson_tags WHERE tag IN ({marks}) GROUP BY lesson_pk HAVING count(*) = ?)"


def _candidate_rows(
    conn: Connection, scope: Scope, tags: tuple[str, ...], candidates: Collection[int], now: datetime
) -> builtins.list[dict[str, Any]]:
    """The live candidates' rows in the scope, with all of ``tags``."""
    marks = ",".join("?" * len(candidates))
    sql = f"SELECT {_COLUMNS} FROM lessons WHERE pk IN ({marks}) AND +org_id = ? AND +project = ? AND {_LIVE}"
    params: list[Any] = [*candidates, scope.org, scope.project, _ts(now)]
    if tags:
        sql += f" AND {_tag_filter(len(tags))}"
        params.extend([*tags, len(tags)])
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
