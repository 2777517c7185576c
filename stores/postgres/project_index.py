"""A project's own HNSW index, and no index of the whole table. pgvector 0.6 filters after its search,
so a table's index serves a project only by a search sized by its share: a 17 % project of a million
needed ``ef_search`` 880 (26 ms, recall@10 0.94-0.96), a 1 % one more than pgvector's 1,000, and every
save of the largest project updated a graph of a million rows. From ``OWN_ROWS`` live rows a project
gets an index of its rows alone, searched with an ``ef_search`` sized by its rows (``PostgresLessons``);
a smaller one is scanned exactly through the scope's b-tree. The predicate is ``lore_scope_key``
(migration 17): a number, never a name."""

from __future__ import annotations

import logging
import threading

import psycopg
from sqlalchemy import Connection, Engine, text

from stores.engine.sql import SqlTx
from stores.postgres.db import direct_connection

logger = logging.getLogger("stores.postgres")

OWN_ROWS = 5_000  # live rows from which a project gets its own index; fewer are scanned exactly
_KEY = "lore_scope_key(org_id, project)"
SCOPE_KEY = f"{_KEY} = lore_scope_key(:org, :project)"  # in a search's filters: proves the predicate
# A recall's nearest-k search there names the org and key alone (its rows are filtered by project again):
# with the project too, the planner counted its rows twice and scanned and sorted the project instead.
OWN_SCOPE = f"org_id = :org AND {SCOPE_KEY}"
_KEY_OF = text("SELECT lore_scope_key(:org, :project)")
_STATE = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)"  # by ``name``: None if none
# Large projects after a bulk load or a re-embed, largest first, and the MB their graph takes (``large_builds``)
_LARGE = f"""SELECT {_KEY} AS key, 64 + count(*) * (1024 + 4 * coalesce(max(vector_dims(embedding)), 0))
    / 1048576 AS mb FROM lessons GROUP BY 1 HAVING count(*) >= :n ORDER BY count(*) DESC"""


def name(key: int) -> str:
    """The index of project ``key`` (an int from ``lore_scope_key``): its hex, as ``to_hex`` writes it."""
    return f"lessons_embedding_{key & (2**64 - 1):x}"


def create(key: int, *, concurrently: bool = False) -> str:
    how = "CONCURRENTLY IF NOT EXISTS" if concurrently else "IF NOT EXISTS"
    return f"CREATE INDEX {how} {name(key)} ON lessons USING hnsw (embedding vector_cosine_ops) WHERE {_KEY} = {int(key)}"


def large_builds(tx: SqlTx) -> list[tuple[str, str]]:
    """Each large project's memory and index build, largest first, for the owner's ``unbounded``
    transactions: a bulk load builds two at once (no parallel workers there), a re-embed's swap in turn."""
    rows = tx.rows(_LARGE, {"n": OWN_ROWS})
    return [(f"SET LOCAL maintenance_work_mem = '{int(row['mb'])}MB'", create(row["key"])) for row in rows]


class ProjectIndexes:
    """Which projects have their own index; a large one without gets it built in the background,
    once a process while it fails (logged; tried again after a restart)."""

    def __init__(self, engine: Engine, direct_url: str | None) -> None:
        self._engine, self._url = engine, direct_url
        self._tried: set[int] = set()
        self._lock = threading.Lock()

    def ready(self, conn: Connection, org: str, project: str, rows: int) -> bool | None:
        """Whether ``project`` (``rows`` live) is large and has a valid index of its own: False if small
        (an exact scan serves it, whatever indexes exist), None if large without one yet (it is built)."""
        if rows < OWN_ROWS:
            return False
        key = conn.execute(_KEY_OF, {"org": org, "project": project}).scalar_one()
        valid = conn.exec_driver_sql(_STATE, (name(key),)).scalar()
        with self._lock:
            start = not valid and key not in self._tried
            self._tried.add(key)
        if start:
            threading.Thread(target=self._build, args=(key,), name="lore-project-index", daemon=True).start()
        return True if valid else None

    def _build(self, key: int) -> None:
        """``CREATE INDEX CONCURRENTLY``: saves go on meanwhile. One process builds a key at a time;
        a build cut short leaves an invalid index, dropped before the next one starts."""
        index = name(key)
        try:
            with direct_connection(self._engine, self._url) as conn:
                if conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() != (True,):
                    return
                valid = conn.execute(_STATE, (index,)).fetchone()
                if valid == (True,):
                    return
                conn.execute("SET statement_timeout = 0; SET max_parallel_maintenance_workers = 0")
                if valid:  # a dead build's
                    conn.execute(f"DROP INDEX CONCURRENTLY {index}")
                conn.execute(create(key, concurrently=True))
                conn.execute("ANALYZE lessons")  # lest the planner, on older statistics, take it for small
            logger.info("built %s, a project's own vector index", index)
            with self._lock:
                self._tried.discard(key)  # built: if a re-embed's new column drops it, build again
        except psycopg.Error as exc:
            logger.warning("a project's own vector index (%s) was not built: %s", index, exc)
