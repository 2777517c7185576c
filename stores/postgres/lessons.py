"""Lessons in Postgres: pgvector (HNSW, cosine) for vectors, tsvector for words.

Same contract, candidates and ``ranking`` scoring as ``stores.sqlite.lessons``, so a query
ranks the same lessons first on both. Transactions set ``lore.org`` for RLS besides filtering."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, text

from stores.engine import dedup, ranking
from stores.engine.activity import ActivityBounds
from stores.engine.activity_rows import ActivityRecords
from stores.engine.embedding_model import GENERATION_KEY, ModelRecords
from stores.engine.keys import KeyStore
from stores.engine.lesson_rows import COLUMNS, LIVE, SCOPE, RolledBack, count_live
from stores.engine.lesson_rules import CallCounts, NoticeFeed
from stores.engine.lessons import KINDS, Lesson, RecallQuery, Scope, WordMatches
from stores.engine.sql import SqlTx
from stores.engine.vectors import check_query
from stores.postgres.call_counts import PostgresCallCounts
from stores.postgres.db import as_owner, transaction, unavailable_on_failure, unbounded
from stores.postgres.dims import PostgresDims
from stores.postgres.keys import PostgresKeyDb
from stores.postgres.migrations import MISSING_INDEXES, migrate
from stores.postgres.models import GENERATION_INFO, PostgresModelDb, generation
from stores.postgres.notices import PostgresNotices
from stores.postgres.project_index import OWN_SCOPE, SCOPE_KEY, ProjectIndexes, large_builds
from stores.postgres.routing import dispose, open_engines
from stores.postgres.sql import PostgresSqlTx

_SCOPED = f"{SCOPE} AND {LIVE}"

# Recall scores every candidate but returns only a few: meta stays text until then.
_RECALL_COLUMNS = ", ".join(f"{c}::text AS {c}" if KINDS.get(c) == "json" else c for c in COLUMNS.split(", "))

# Nearest k by HNSW (``:near_k``: 0 where it cannot find k); if its filters leave it short, an exact scan of the
# scope replaces them, keeping distances, not vectors (10,000 vectors spilled to disk: 18 ms against 11).
_VECTOR_CANDIDATES = """
nearest AS MATERIALIZED (
    SELECT pk FROM lessons WHERE {searched} ORDER BY embedding <=> :q LIMIT {near_k}
), scoped AS MATERIALIZED (
    SELECT pk, d FROM {exact} WHERE (SELECT count(*) FROM nearest) < :k
), vector AS (
    SELECT pk FROM nearest WHERE (SELECT count(*) FROM nearest) >= :k
    UNION ALL (SELECT pk FROM scoped ORDER BY d LIMIT :k)
)"""

_EXACT = "(SELECT pk, embedding <=> :q AS d FROM lessons WHERE {filters}) AS e"
# A tag in a large project (migration 18): HNSW only if the tag's share of what it reaches (``ef_search`` rows
# of the project's own index) holds k, else the exact scan through the tags' index.
_TAGGED = {
    "near_k": "CASE WHEN lore_tag_share(CAST(:tags AS text[])) * :reach >= 1.5 * :k THEN :near_k ELSE 0 END",
    "exact": "lore_nearest_tagged(:project, CAST(:tags AS text[]), :now, :min_conf, :q, :k) AS e(pk, d)",
}

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
# Full-text search of the chosen terms (``:tsq`` or ``:entities`` for ``{tsq}``: ``word_keys``).
_LEXICAL = (
    "SELECT c.pk FROM lore_lexical_candidates(:project, {tsq}, :order, :k, :now, :min_conf, "
    "CAST(:tags AS text[])) AS c(pk)"
)


# Appended to ``_begin``: the model generation, and a mention of ``lessons`` locking it before
# the snapshot, so a transaction that waited for a re-embed's swap reads the generation it wrote.
_GENERATION = (
    f"(SELECT value FROM lore_meta WHERE key = '{GENERATION_KEY}')",
    "(SELECT count(*) FROM (SELECT 1 FROM lessons LIMIT 0) AS lock_lessons)",
)


# ``ef_search`` in a project's own index (``project_index``): one per ``_ROWS_PER_EF`` of its rows, from twice the
# candidates wanted to pgvector's most, 1,000: a small search in a large graph misses whole clusters (a million's
# largest project: recall@10 0.90 with 100, 0.96 with 600), a larger one costs time (docs/performance.md).
_ROWS_PER_EF = 280
# Projects a bulk load writes at once (one's Python beside another's statements), then indexes (2 cores).
_WRITERS = 2

# pgvector 0.8+ scans on while filters leave too few, to twice ``ef_search`` tuples (a 0.2 % tag: 238 -> 137
# ms), before the exact scan 0.6 takes at once.
_ITERATIVE = (
    "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
    "set_config('hnsw.max_scan_tuples', :scan_max, true)",
)


def _pgvector_version(engine: Any) -> tuple[int, ...]:
    """The installed pgvector's version, as numbers (``(0, 6, 2)``)."""
    with engine.connect() as conn:
        found = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    return tuple(int(part) for part in str(found or "0").split(".") if part.isdigit())


class PostgresLessons:
    """``stores.engine.lesson_rules.LessonBackend`` on Postgres with pgvector: ``SqlStore``'s leaf."""

    rides_activity = False  # row-level security confines a write to its org; entries of others wait

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
        self.ranking = ranking_params or ranking.RankingParams()
        self._engine, self._reads = open_engines(url, pool_size, read_url=read_url, direct_url=direct_url)
        migrate(self._engine)
        key_db = PostgresKeyDb(self._engine)
        self.activity = ActivityRecords(key_db, activity_bounds)
        # Orgs and API keys in this same database, on this engine.
        self.keys = KeyStore(key_db, self.activity.log)
        self._dims = PostgresDims(self._engine)
        self.models = ModelRecords(PostgresModelDb(self._engine, self._dims))
        # In this database, shared by every server process on it: the counts and LISTEN/NOTIFY.
        self.call_counts: CallCounts | None = PostgresCallCounts(self._engine)
        self._notices = PostgresNotices(self._engine, listen_url=direct_url)
        self.notices: NoticeFeed | None = self._notices
        self._scan = _ITERATIVE if _pgvector_version(self._engine) >= (0, 8) else ()
        self._own = ProjectIndexes(self._engine, direct_url)
        self._owned: dict[tuple[str, str], tuple[int, float]] = {}  # scope: ``_indexed``, until when
        self._held: _Held | None = None  # the import's rows while ``bulk`` has the indexes down

    @contextlib.contextmanager
    def bulk(self, org: str, coming: int) -> Iterator[int]:
        """``SqlStore.bulk``: an import larger than ``lessons``, by its owner, loads without the full-text
        index (0.55 ms a row of upkeep) and the HNSW indexes of projects it makes large (1.0 ms), and
        builds them after, as pg_restore does (a killed one leaves that to ``migrate`` and recall);
        near duplicates among its rows: ``_Held``.
        ``_WRITERS`` projects are written at once, each on its own connection."""
        with transaction(self._engine, org) as conn:
            upto = conn.execute(_BULK, {"n": coming}).scalar()
        self._held = _Held(upto) if upto is not None else None
        try:
            yield _WRITERS
        finally:
            if self._held is not None:
                self._held = None
                with transaction(self._engine, None) as conn, unbounded(conn):
                    conn.exec_driver_sql("ANALYZE lessons")
                    builds = [(MISSING_INDEXES,), *large_builds(PostgresSqlTx(conn))]
                with ThreadPoolExecutor(_WRITERS, thread_name_prefix="lore-index") as pool:
                    list(pool.map(self._build, builds))  # largest first, ``_WRITERS`` at once

    def _build(self, statements: Sequence[str]) -> None:
        """One index a bulk load left for after, in its own transaction as the owner."""
        with transaction(self._engine, None) as conn, unbounded(conn):
            as_owner(conn, *statements)

    @contextlib.contextmanager
    def writing(self, scope: Scope, dim: int | None) -> Iterator[PostgresLessonRows]:
        """The project's advisory lock, once the vector column fits (``PostgresDims.ensure``).
        Writes to a project take turns: concurrent near-duplicates merge, sequences stay dense."""
        if dim is not None:
            self._dims.ensure(dim)  # a new column comes with its index: dropped below in a bulk load
        if self._held:
            self._held.drop_indexes(self._engine)
        lock = "pg_advisory_xact_lock(hashtext(:key))"
        # A bulk load skips the WAL flush (6 ms a commit): a crash may lose batches a re-run redoes.
        fast = ("set_config('synchronous_commit', 'off', true)",) if self._held else ()
        own = not self._held and self._indexed(scope, self._engine) > 0  # a bulk load's: ``_Held``
        with self._begin(scope.org, lock, *fast, key=f"{scope.org}/{scope.project}") as conn:
            yield PostgresLessonRows(self._dims, conn, scope, lock=True, held=self._held, own=own)

    @contextlib.contextmanager
    def reading(self, scope: Scope, *, lagging: bool = False) -> Iterator[PostgresLessonRows]:
        with transaction(self._reads if lagging else self._engine, scope.org) as conn:
            yield PostgresLessonRows(self._dims, conn, scope, lock=False)

    def candidates(
        self, scope: Scope, query: RecallQuery, words: WordMatches, vector: Callable[[], np.ndarray], k: int
    ) -> list[dict[str, Any]]:
        """Recall's second transaction: nearest vectors and candidate rows in one statement."""
        q = vector()
        ef_search = "set_config('hnsw.ef_search', :ef, true)"
        rows = self._indexed(scope, self._reads)
        own, ef = rows > 0, min(1000, max(2 * k, rows // _ROWS_PER_EF))
        near_k = k if own else 0  # without its own index, the exact scan
        with self._begin(
            scope.org, ef_search, *self._scan, engine=self._reads, ef=str(ef), scan_max=str(2 * ef)
        ) as conn:
            self.models.check(generation(conn))
            dim = self._dims.stored(conn)
            check_query(dim, q.shape[0])
            if dim is None and not words.keys:
                return []
            filters, params = self._recall_filters(scope, query, words.now)
            searched = filters.replace(SCOPE, OWN_SCOPE, 1) if own else filters  # the rows: by SCOPE again
            ctes, sim, near = "", "NULL", "false"
            candidates = "SELECT unnest(CAST(:lexical AS bigint[]))"
            if dim is not None:
                tagged = query.tags and own  # HNSW serves the project
                scans = _TAGGED if tagged else {"near_k": ":near_k", "exact": _EXACT.format(filters=filters)}
                nearest = _VECTOR_CANDIDATES.format(searched=searched, **scans)
                ctes = f"WITH {nearest} "
                candidates = f"SELECT pk FROM vector UNION {candidates}"
                sim, near = "1 - (embedding <=> :q)", "pk IN (SELECT pk FROM vector)"
                if self.ranking.centring:
                    ctes = f"WITH {nearest}, {_ANCHOR} "
                    sim = _CENTRED_SIMILARITY
                    params.update(anchor_n=ranking.ANCHOR_SAMPLE, zero=np.zeros(dim, dtype=np.float32))
            sql = (
                f"{ctes}SELECT {_RECALL_COLUMNS}, {sim} AS sim, {near} AS near FROM lessons "
                f"WHERE pk IN ({candidates}) AND {filters}"
            )
            params.update(q=q, k=k, near_k=near_k, reach=ef, lexical=list(words.keys))
            return PostgresSqlTx(conn).rows(sql, params)

    def _indexed(self, scope: Scope, engine: Engine) -> int:
        """The project's live rows if it has its own index, else 0; looked up at most once a minute,
        or every 5 s while a large one has none (``ProjectIndexes.ready`` builds it), so that recall
        and a batch's near-duplicate search, which scans the project once per lesson, take it soon.
        A write looks on the primary: a replica may not have the table yet."""
        key, now = (scope.org, scope.project), time.monotonic()
        known = self._owned.get(key)
        if known is not None and now < known[1]:
            return known[0]
        with transaction(engine, scope.org) as conn:
            rows = count_live(PostgresSqlTx(conn), scope.org, scope.project, datetime.now(UTC))
            own = self._own.ready(conn, scope.org, scope.project, rows)
        self._owned[key] = (rows if own else 0, now + (5 if own is None else 60))
        return rows if own else 0

    def word_keys(
        self, scope: Scope, query: RecallQuery, terms: list[str], k: int, now: datetime
    ) -> list[int]:
        """Best full-text keys: one trip sets the org and estimates postings, a second ranks (migration 4)."""
        with unavailable_on_failure(), self._reads.begin() as conn:
            postings = conn.execute(
                text("SELECT set_config('lore.org', :org, true), lore_term_postings(CAST(:terms AS text[]))"),
                {"org": scope.org, "terms": terms},
            ).one()[1]
            found = dict(zip(terms, postings, strict=True))
            chosen, ordering = ranking.full_text_terms(query.text, terms, found, self.ranking)
            if not chosen:
                return []
            # Ordered by ``ordering`` (migration 7). ts_rank ignores rarity, so chosen entities are
            # also searched alone, lest many common words crowd them out.
            alone = [t for t in chosen if ranking.is_entity(t)]
            sql = _LEXICAL.format(tsq=":tsq")
            if alone and len(alone) < len(chosen):
                sql = f"({sql}) UNION ({_LEXICAL.format(tsq=':entities')})"
            # Terms are letters and digits joined by . _ / - (lexical_terms): the tsquery is well formed.
            params = {"project": scope.project, "k": k, "now": now, "min_conf": query.min_confidence}
            params.update(tsq=" | ".join(chosen), entities=" | ".join(alone), order=" | ".join(ordering))
            return [row[0] for row in conn.execute(text(sql), {**params, "tags": list(query.tags)})]

    def ensure_dim(self, dim: int) -> None:
        self._dims.ensure(dim)

    def probe_write(self) -> None:
        """``stores.Store.probe_write``: an update in a transaction that is rolled back."""
        with contextlib.suppress(RolledBack), transaction(self._engine, None) as conn:
            conn.execute(text("UPDATE lore_meta SET value = value WHERE key = 'dim'"))
            raise RolledBack

    def close(self) -> None:
        self._notices.close()
        self.activity.close()
        dispose(self._engine, self._reads)

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

    def _recall_filters(self, scope: Scope, query: RecallQuery, now: datetime) -> tuple[str, dict[str, Any]]:
        filters = f"{_SCOPED} AND confidence >= :min_conf"
        params: dict[str, Any] = {**scope.params, "now": now, "min_conf": query.min_confidence}
        if query.tags:
            filters += " AND tags @> :tags"
            params["tags"] = list(query.tags)
        return filters, params


# Every vector of a batch in one round trip: the nearest ``k`` of each; keyed by whether the project
# has its own index, which the key's filter lets the planner take, else by an exact scan.
_NEAREST = {
    own: text(
        "SELECT q.i, n.pk, n.sim FROM unnest(CAST(CAST(:qs AS text[]) AS vector[])) WITH ORDINALITY AS q(v, i) "
        "CROSS JOIN LATERAL (SELECT pk, 1 - (embedding <=> q.v) AS sim FROM lessons "
        f"WHERE {SCOPE} AND {LIVE} AND pk <= :upto{f' AND {SCOPE_KEY}' if own else ''} "
        "ORDER BY embedding <=> q.v LIMIT :k) AS n"
    )
    for own in (False, True)
}
# ``bulk``: the last key before the import, or None: keep the indexes.
_BULK = text(
    "SELECT (SELECT coalesce(max(pk), 0) FROM lessons) FROM pg_class WHERE oid = 'lessons'::regclass "
    "AND greatest(reltuples, 0) < :n AND pg_has_role(session_user, relowner, 'MEMBER')"
)


class _Block:
    """One project's held keys, expiry and vectors, with room to grow: a batch is copied in once, not
    the whole block again."""

    def __init__(self, keys: np.ndarray, expiry: np.ndarray, matrix: np.ndarray) -> None:
        self.n, self.keys, self.expiry, self.matrix = len(keys), keys, expiry, matrix

    def extend(self, keys: np.ndarray, expiry: np.ndarray, matrix: np.ndarray) -> None:
        end = self.n + len(keys)
        if end > len(self.keys):  # doubling: each row is copied about twice in all
            size = max(end, 2 * len(self.keys))
            self.keys, self.expiry = np.resize(self.keys, size), np.resize(self.expiry, size)
            grown = np.empty((size, matrix.shape[1]), np.float32)
            grown[: self.n] = self.matrix[: self.n]
            self.matrix = grown
        self.keys[self.n : end], self.expiry[self.n : end], self.matrix[self.n : end] = keys, expiry, matrix
        self.n = end


class _Held:
    """An import's rows while ``bulk`` has the indexes down (one import a process, the CLI's): keys,
    expiry and unit vectors, matched in one product per batch instead of HNSW. Each writer thread of
    ``Transfer`` writes project after project, so its new project frees its last one's rows."""

    def __init__(self, upto: int) -> None:
        self.upto = upto  # rows at or below key ``upto`` were there before it
        self.rows: dict[str, _Block] = {}
        self._writing: dict[int, str] = {}  # thread -> the project it writes
        self._lock, self._dropped = threading.Lock(), False

    def drop_indexes(self, engine: Engine) -> None:
        """Drop the indexes a bulk load builds after, before its first write."""
        with self._lock:
            if not self._dropped:
                with transaction(engine, None) as conn:
                    as_owner(conn, "DROP INDEX IF EXISTS lessons_tsv")
                self._dropped = True

    def add(self, project: str, rows: Sequence[Mapping[str, Any]], keys_by_id: Mapping[str, int]) -> None:
        expiry = np.array([row["expires_at"].timestamp() if row["expires_at"] else math.inf for row in rows])
        keys = np.array([keys_by_id[row["id"]] for row in rows])
        matrix = np.stack([row["embedding"] for row in rows])
        with self._lock:
            last = self._writing.get(thread := threading.get_ident())
            if last != project:
                self.rows.pop(last or "", None)
                self._writing[thread] = project
            if block := self.rows.get(project):
                block.extend(keys, expiry, matrix)
            else:
                self.rows[project] = _Block(keys, expiry, matrix)

    def near(self, project: str, vecs: Sequence[np.ndarray], now: float) -> Iterator[tuple[int, int, float]]:
        """(vector's index, key, similarity) of each held row live at ``now`` and near enough to merge."""
        if project not in self.rows:
            return iter(())
        block = self.rows[project]
        # Rows x 256 similarities: only the few columns with a near row are searched, their rows' expiry read.
        sims = block.matrix[: block.n] @ np.stack(vecs).T
        cols = np.flatnonzero(sims.max(axis=0) >= dedup.CANDIDATE_SIMILARITY)
        rows, at = np.nonzero(sims[:, cols] >= dedup.CANDIDATE_SIMILARITY)
        live = block.expiry[rows] > now
        keys, pairs = block.keys, zip(rows[live], cols[at[live]], strict=True)
        return ((int(c), int(keys[r]), float(sims[r, c])) for r, c in pairs)


# A bulk write that grew ``lessons`` by a fifth (and 1,000 rows) since its statistics refreshes them, where this
# login may: on stale ones the planner finds a batch's near duplicates by scanning the project, not by HNSW.
_STALE = text(
    "SELECT s.n_mod_since_analyze > 1000 + 0.2 * greatest(c.reltuples, 0) AND pg_has_role(session_user, "
    "c.relowner, 'MEMBER') FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = 'lessons'::regclass"
)


class PostgresLessonRows:
    """Postgres's side of a lesson transaction; ``lock`` locks every row read."""

    def __init__(
        self,
        dims: PostgresDims,
        conn: Connection,
        scope: Scope,
        *,
        lock: bool,
        held: _Held | None = None,
        own: bool = False,
    ) -> None:
        self.sql: SqlTx = PostgresSqlTx(conn)
        self.project_sql: SqlTx = PostgresSqlTx(conn, bounded=True)  # tables and commits: deadline-bounded
        self._dims, self._conn, self._scope, self._held = dims, conn, scope, held
        self._nearest = _NEAREST[own]
        self.row_lock = " FOR UPDATE" if lock else ""
        # No vector column before the first vector (a fresh store): reads then select none.
        self.embedding_select = ", embedding" if dims.stored(conn) is not None else ""

    def generation(self) -> int:
        return generation(self._conn)

    def ensure_dim(self, dim: int) -> None:
        self._dims.check(self._conn, dim)

    def nearest(self, vectors: Sequence[np.ndarray], now: datetime) -> list[list[tuple[int, float]]]:
        if not vectors or self._dims.stored(self._conn) is None:
            return [[] for _ in vectors]
        found: list[list[tuple[int, float]]] = [[] for _ in vectors]
        if upto := self._held.upto if self._held else 2**62:  # held: the rows before the import, exactly
            qs = [("[" + ",".join(["%.9g"] * len(vec)) + "]") % tuple(vec.tolist()) for vec in vectors]
            params = {**self._scope.params, "now": now, "k": dedup.MAX_SIMILAR, "qs": qs, "upto": upto}
            for r in self._conn.execute(self._nearest, params):
                if r.sim >= dedup.CANDIDATE_SIMILARITY:
                    found[r.i - 1].append((r.pk, float(r.sim)))
        held = self._held.near(self._scope.project, vectors, now.timestamp()) if self._held else ()
        for i, key, sim in held:  # the import's own rows, not in the table's index meanwhile
            found[i].append((key, sim))
        return found

    def columns(self, vector: np.ndarray | None) -> dict[str, Any]:
        return {"embedding": vector} if vector is not None else {}

    def copy_rows(self, scope: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """COPY into a temporary table, then ``INSERT ... SELECT``: RLS on ``lessons`` refuses a COPY."""
        names = ["id", "org_id", "project", *(name for name in rows[0] if name != "id")]
        columns = ", ".join(names)  # the engine's column names, never user text
        typed = columns.replace("embedding", "CAST(embedding AS vector) AS embedding")  # any dimension
        self._conn.exec_driver_sql(
            f"CREATE TEMP TABLE IF NOT EXISTS lore_copy ON COMMIT DELETE ROWS AS SELECT {typed} FROM lessons LIMIT 0"
        )
        raw = self._conn.connection.driver_connection
        assert raw is not None
        with raw.cursor() as cursor:  # binary: a vector as text took 0.25 ms to write (a 100k import: 25 s)
            described = cursor.execute(f"SELECT {columns} FROM lore_copy LIMIT 0").description or ()
            with cursor.copy(f"COPY lore_copy ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types([c.type_code for c in described])
                for row in rows:
                    values = (Jsonb(row[n], str) if KINDS.get(n) == "json" else row[n] for n in names[3:])
                    copy.write_row([row["id"], scope["org"], scope["project"], *values])
        inserted = self._conn.execute(
            text(f"INSERT INTO lessons ({columns}) SELECT {columns} FROM lore_copy RETURNING id, pk")
        )
        keys: dict[str, int] = {row[0]: row[1] for row in inserted}
        if self._held:
            self._held.add(self._scope.project, rows, keys)
        if not self._held and self._conn.execute(_STALE).scalar():  # held: no index to plan for
            role = self._conn.execute(text("SELECT current_user")).scalar()
            as_owner(self._conn, "ANALYZE lessons")
            self._conn.execute(text("SELECT set_config('role', :role, true)"), {"role": role})
        return keys

    def written(self, key: int, lesson: Lesson, vector: np.ndarray | None, *, new: bool) -> None:
        """Nothing more: the row holds the vector, and its words are a generated column."""

    def embedding(self, row: Mapping[str, Any]) -> bytes | None:
        """float32 bytes, from pgvector's Vector or ndarray (by version)."""
        found = row.get("embedding")
        if found is None:
            return None
        array = found.to_numpy() if hasattr(found, "to_numpy") else found
        return np.asarray(array, dtype=np.float32).tobytes()

    def removed(self, key: int) -> None:
        """Nothing more: the row held everything."""

    def tagged(self, tags: str, count: str) -> str:
        del count  # an array holds all of them or not
        return f"tags @> :{tags}"
