"""Lessons in Postgres: pgvector (HNSW, cosine) for vectors, tsvector for words.

Same contract, candidates and ``ranking`` scoring as ``stores.sqlite.lessons``, so a query
ranks the same lessons first on both. Transactions set ``lore.org`` for RLS besides filtering."""

from __future__ import annotations

import builtins
import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, text

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
from stores.engine.embedding_model import GENERATION_KEY, ModelRecords
from stores.engine.keys import KeyStore
from stores.engine.lesson_rows import COLUMNS as _COLUMNS
from stores.engine.lesson_rows import LIVE, SCOPE, LessonReads, SqlLessonTx, count_live
from stores.engine.lesson_rules import LessonWrites
from stores.engine.lesson_tx import ModelChecks, check_dims
from stores.engine.lessons import KINDS, LessonPage, RecallQuery, Scope, ScoredLesson, WordMatches
from stores.engine.recall_scoring import TwoStepRecall, scored_lessons
from stores.engine.structured import ProjectTx
from stores.engine.vectors import unit_vector
from stores.errors import InvalidInputError
from stores.postgres.call_counts import PostgresCallCounts
from stores.postgres.db import transaction, unavailable_on_failure
from stores.postgres.dims import PostgresDims
from stores.postgres.keys import PostgresKeyDb
from stores.postgres.lesson_rows import PostgresLessonRows
from stores.postgres.migrations import migrate
from stores.postgres.models import GENERATION_INFO, PostgresModelDb, generation
from stores.postgres.notices import PostgresNotices
from stores.postgres.routing import open_engines
from stores.postgres.sql import PostgresSqlTx

_SCOPED = f"{SCOPE} AND {LIVE}"

# Recall scores every candidate but returns only a few: meta stays text until then.
_RECALL_COLUMNS = ", ".join(
    f"{c}::text AS {c}" if KINDS.get(c) == "json" else c for c in _COLUMNS.split(", ")
)

# Nearest k by HNSW; when its post-search filters leave it short an exact scoped scan replaces
# them (the one-time filter on ``scoped`` skips that scan whenever the index found k).
_VECTOR_CANDIDATES = """
nearest AS MATERIALIZED (
    SELECT pk FROM lessons WHERE {filters} ORDER BY embedding <=> :q LIMIT :k
), scoped AS MATERIALIZED (
    SELECT pk, embedding FROM lessons WHERE {filters} AND (SELECT count(*) FROM nearest) < :k
), vector AS (
    SELECT pk FROM nearest WHERE (SELECT count(*) FROM nearest) >= :k
    UNION ALL (SELECT pk FROM scoped ORDER BY embedding <=> :q LIMIT :k)
)"""

# ``ranking.anchor`` and ``ranking.centred_similarities`` in SQL.
_ANCHOR = f"""anchor AS MATERIALIZED (
    SELECT avg(e) AS a FROM (
        (SELECT embedding AS e FROM lessons WHERE {_SCOPED} ORDER BY id DESC LIMIT :anchor_n)
        UNION ALL SELECT CAST(:zero AS vector)
    ) AS sample
)"""
_CENTRED_SIMILARITY = (
    "1 - ((embedding - (SELECT a FROM anchor)) <=> (CAST(:q AS vector) - (SELECT a FROM anchor)))"
)


# Appended to ``_begin``: the model generation, and a mention of ``lessons`` locking it before
# the snapshot, so a transaction that waited for a re-embed's swap reads the generation it wrote.
_GENERATION = (
    f"(SELECT value FROM lore_meta WHERE key = '{GENERATION_KEY}')",
    "(SELECT count(*) FROM (SELECT 1 FROM lessons LIMIT 0) AS lock_lessons)",
)


# pgvector 0.8+ scans on until filters leave k rows, so small projects use the index; the exact
# scan below is the fallback on older servers (pgserver ships 0.6.2).
_ITERATIVE = ("set_config('hnsw.iterative_scan', 'relaxed_order', true)",)


def _pgvector_version(engine: Any) -> tuple[int, ...]:
    """The installed pgvector's version, as numbers (``(0, 6, 2)``)."""
    with engine.connect() as conn:
        found = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    return tuple(int(part) for part in str(found or "0").split(".") if part.isdigit())


class _ProbeDone(Exception):
    """Raised inside the probe's transaction so that it rolls back."""


class PostgresLessonStore(LessonReads, LessonWrites, TwoStepRecall):
    """``stores.Store`` on Postgres with pgvector."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        ranking_params: ranking.RankingParams | None = None,
        activity_bounds: ActivityBounds | None = None,
        read_url: str | None = None,
        direct_url: str | None = None,
    ) -> None:
        self._ranking = ranking_params or ranking.RankingParams()
        self._engines = open_engines(url, pool_size, read_url=read_url, direct_url=direct_url)
        self._engine, self._reads = self._engines.primary, self._engines.reads
        migrate(self._engine)
        self._key_db = PostgresKeyDb(self._engine)
        self._activity = ActivityRecords(self._key_db, activity_bounds)
        self._dims = PostgresDims(self._engine)
        self._models = ModelRecords(PostgresModelDb(self._engine, self._dims))
        self._call_counts = PostgresCallCounts(self._engine)
        self._notices = PostgresNotices(self._engine, listen_url=direct_url)
        self._scan = _ITERATIVE if _pgvector_version(self._engine) >= (0, 8) else ()
        self._shares: dict[tuple[str, str], tuple[float, float]] = {}  # scope -> (share of rows, when)

    def rank(self, scope: Scope, query: RecallQuery, words: WordMatches) -> builtins.list[ScoredLesson]:
        """Recall's second transaction: nearest vectors and candidate rows in one statement."""
        now, terms, lexical = words.now, list(words.terms), list(words.keys)
        k = ranking.candidate_count(query.limit, self._ranking)
        q = unit_vector(query.needs_vector())
        ef_search = "set_config('hnsw.ef_search', :ef, true)"
        ef = 2 * k if self._scan else math.ceil(1.5 * k / self._share(scope))
        with self._begin(
            scope.org, ef_search, *self._scan, engine=self._reads, ef=str(min(1000, max(2 * k, ef)))
        ) as conn:
            self._models.check(generation(conn))
            dim = self._dims.stored(conn)
            if dim is not None and q.shape[0] != dim:
                raise InvalidInputError(
                    f"This store holds {dim}-dimension vectors but the query vector has {q.shape[0]}: "
                    "the database was created with a different embedding model."
                )
            if dim is None and not lexical:
                return []
            filters, params = self._recall_filters(scope, query, now)
            ctes, sim, near = "", "NULL", "false"
            candidates = "SELECT unnest(CAST(:lexical AS bigint[]))"
            if dim is not None:
                ctes = f"WITH {_VECTOR_CANDIDATES.format(filters=filters)} "
                candidates = f"SELECT pk FROM vector UNION {candidates}"
                sim, near = "1 - (embedding <=> :q)", "pk IN (SELECT pk FROM vector)"
                if self._ranking.centring:
                    ctes = f"WITH {_VECTOR_CANDIDATES.format(filters=filters)}, {_ANCHOR} "
                    sim = _CENTRED_SIMILARITY
                    params.update(anchor_n=ranking.ANCHOR_SAMPLE, zero=np.zeros(dim, dtype=np.float32))
            sql = (
                f"{ctes}SELECT {_RECALL_COLUMNS}, {sim} AS sim, {near} AS near FROM lessons "
                f"WHERE pk IN ({candidates}) AND {filters}"
            )
            rows = PostgresSqlTx(conn).rows(sql, {**params, "q": q, "k": k, "lexical": lexical})
        return scored_lessons(rows, query, terms, now, self._ranking)

    def _share(self, scope: Scope) -> float:
        """The project's share of rows, counted at most once a minute. HNSW filters after its
        search, finding about ``ef_search`` times the share, so recall sizes ``ef_search`` by it;
        only when even 1,000 is too few (a project under a few percent) does the exact scan,
        cheap for such a project, take over."""
        key, now = (scope.org, scope.project), time.monotonic()
        known = self._shares.get(key)
        if known is not None and now - known[1] < 60:
            return known[0]
        with transaction(self._reads, scope.org) as conn:
            total = conn.execute(
                text("SELECT greatest(reltuples, 1) FROM pg_class WHERE oid = 'lessons'::regclass")
            ).scalar()
            rows = count_live(PostgresSqlTx(conn), scope.org, scope.project, _now())
        share = min(1.0, max(rows, 1) / float(total or 1))
        self._shares[key] = (share, now)
        return share

    def count(self, org: str, project: str | None = None) -> int:
        with transaction(self._engine, org) as conn:
            return count_live(PostgresSqlTx(conn), org, project, _now())

    def probe_write(self) -> None:
        """``stores.Store.probe_write``: an update in a transaction that is rolled back."""
        try:
            with transaction(self._engine, None) as conn:
                conn.execute(text("UPDATE lore_meta SET value = value WHERE key = 'dim'"))
                raise _ProbeDone
        except _ProbeDone:
            pass

    @property
    def call_counts(self) -> PostgresCallCounts:
        """``stores.Store.call_counts``: in this database, shared by every server process on it."""
        return self._call_counts

    @property
    def notices(self) -> PostgresNotices:
        """``stores.Store.notices``: LISTEN/NOTIFY on this database, heard by every server process on it."""
        return self._notices

    def close(self) -> None:
        self._notices.close()
        self._activity.close()
        self._engines.dispose()

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

    # -- the transactions of stores.engine.lesson_rules -----------------------------------

    @contextlib.contextmanager
    def _lesson_writer(self, scope: Scope, vectors: Sequence[np.ndarray]) -> Iterator[SqlLessonTx]:
        """The project's advisory lock, once the vector column fits (``PostgresDims.check``)."""
        if vectors:
            check_dims(vectors, self._dims.ensure(vectors[0].shape[0]))
        with self._writing(scope) as conn:
            yield self._tx(conn, scope, lock=True)

    @contextlib.contextmanager
    def _lesson_reader(self, scope: Scope) -> Iterator[SqlLessonTx]:
        with transaction(self._engines.reader(), scope.org) as conn:
            yield self._tx(conn, scope, lock=False)

    def list(self, scope: Scope, tags: tuple[str, ...], limit: int, cursor: str | None) -> LessonPage:
        with self._engines.on_replica():
            return super().list(scope, tags, limit, cursor)

    @contextlib.contextmanager
    def transaction(self, scope: Scope, *, write: bool) -> Iterator[ProjectTx]:
        with self._engines.on_replica(not write), super().transaction(scope, write=write) as tx:
            yield tx

    def _tx(self, conn: Connection, scope: Scope, *, lock: bool) -> SqlLessonTx:
        """Lesson rows in ``conn``'s transaction; tables and commits are deadline-bounded."""
        rows = PostgresLessonRows(self._dims, conn, scope, lock=lock)
        checks = ModelChecks(self._models, lambda: generation(conn))
        return SqlLessonTx(
            PostgresSqlTx(conn),
            scope,
            _now(),
            rows,
            checks,
            PostgresSqlTx(conn, bounded=True),
            activity=self._activity.log,
        )

    # -- internals ----------------------------------------------------------------

    @contextlib.contextmanager
    def _begin(
        self, org: str, *also: str, engine: Engine | None = None, **params: Any
    ) -> Iterator[Connection]:
        """A transaction whose ``lore.org`` statement also runs ``also`` (no rows touched, so RLS
        holds first, a round trip sooner) and reads the model generation."""
        calls = ", ".join(("set_config('lore.org', :org, true)", *also, *_GENERATION))
        with unavailable_on_failure(), (engine or self._engine).begin() as conn:
            row = conn.execute(text(f"SELECT {calls}"), {**params, "org": org}).one()
            conn.info[GENERATION_INFO] = int(row[-2] or 0)
            try:
                yield conn
            finally:
                conn.info.pop(GENERATION_INFO, None)

    def _writing(self, scope: Scope) -> contextlib.AbstractContextManager[Connection]:
        # Writes to a project take turns: concurrent near-duplicates merge, sequences stay dense.
        lock = "pg_advisory_xact_lock(hashtext(:key))"
        return self._begin(scope.org, lock, key=f"{scope.org}/{scope.project}")

    def _recall_filters(self, scope: Scope, query: RecallQuery, now: datetime) -> tuple[str, dict[str, Any]]:
        filters = f"{_SCOPED} AND confidence >= :min_conf"
        params: dict[str, Any] = {**_scope_params(scope, now), "min_conf": query.min_confidence}
        if query.tags:
            filters += " AND tags @> :tags"
            params["tags"] = list(query.tags)
        return filters, params

    def _word_keys(
        self, scope: Scope, query: RecallQuery, terms: builtins.list[str], k: int, now: datetime
    ) -> builtins.list[int]:
        """Best full-text keys: one trip sets the org and estimates postings, a second ranks (migration 4)."""
        with unavailable_on_failure(), self._reads.begin() as conn:
            postings = conn.execute(
                text("SELECT set_config('lore.org', :org, true), lore_term_postings(CAST(:terms AS text[]))"),
                {"org": scope.org, "terms": terms},
            ).one()[1]
            found = dict(zip(terms, postings, strict=True))
            chosen, ordering = ranking.full_text_terms(query.text, terms, found, self._ranking)
            if not chosen:
                return []
            sql, params = _lexical_call(chosen, ordering)
            rows = conn.execute(
                text(sql),
                {
                    **params,
                    "project": scope.project,
                    "k": k,
                    "now": now,
                    "min_conf": query.min_confidence,
                    "tags": list(query.tags),
                },
            )
            return [row[0] for row in rows]

    def ensure_dim(self, dim: int) -> None:
        self._dims.ensure(dim)

    # -- the embedding model -------------------------------------------------------

    @property
    def models(self) -> ModelRecords:
        """The model that made this database's vectors, and re-embedding (``stores.engine.embedding_model``)."""
        return self._models

    # -- orgs and api keys ---------------------------------------------------------

    def _key_store(self) -> KeyStore:
        """Orgs and API keys in this same database, on this store's engine."""
        return KeyStore(self._key_db, self._activity.log)


def _lexical_call(chosen: builtins.list[str], ordering: builtins.list[str]) -> tuple[str, dict[str, str]]:
    """Full-text search of ``chosen``, ordered by ``ordering`` (migration 7). ts_rank ignores
    rarity, so chosen entities are also searched alone, lest many common words crowd them out."""
    alone = [t for t in chosen if ranking.is_entity(t)]
    call = (
        "SELECT c.pk FROM lore_lexical_candidates(:project, {tsq}, :order, :k, :now, :min_conf, "
        "CAST(:tags AS text[])) AS c(pk)"
    )
    sql = call.format(tsq=":tsq")
    if alone and len(alone) < len(chosen):
        sql = f"({sql}) UNION ({call.format(tsq=':entities')})"
    # Terms are letters and digits joined by . _ / - (lexical_terms): the tsquery is well formed.
    return sql, {"tsq": " | ".join(chosen), "entities": " | ".join(alone), "order": " | ".join(ordering)}


def _scope_params(scope: Scope, now: datetime) -> dict[str, Any]:
    return {"org": scope.org, "project": scope.project, "now": now}


def _now() -> datetime:
    return datetime.now(UTC)
