"""A mid-sized project's own HNSW index. pgvector 0.6 filters after its search, so the table's index
serves a project only by a search sized by its share, up to 1,000 (7.5 % of the rows or more); a
smaller one reads all its vectors (a 1 % project of a million: 10,000, a recall of 27-30 ms). From
``OWN_ROWS`` on, it gets an index of its rows alone, searched for twice the candidates wanted. Larger
shares keep the table's: a second graph would cost each of their saves (17 % of a million: 25.6 ms at
the store, not 13). The predicate is ``lore_scope_key`` (migration 17): a number, never a name."""

from __future__ import annotations

import logging
import threading

import psycopg
from sqlalchemy import Connection, Engine, text

from stores.postgres.db import direct_connection

logger = logging.getLogger("stores.postgres")

OWN_ROWS = 5_000  # live rows from which a project gets its own index; fewer are scanned exactly
OWN_SHARE = 0.075  # up to this share of the rows: from it on, ``candidates`` searches the table's index
_KEY = "lore_scope_key(org_id, project)"
SCOPE_KEY = f"{_KEY} = lore_scope_key(:org, :project)"  # in a search's filters: proves the predicate
# A recall's nearest-k search there names the org and key alone (its rows are filtered by project
# again after): with the project too, the planner counted its rows twice (1 % x 0.5 %), took k for
# all of them and, at a million, scanned and sorted the project's 10,000 rows instead.
OWN_SCOPE = f"org_id = :org AND {SCOPE_KEY}"
_KEY_OF = text("SELECT lore_scope_key(:org, :project)")
_STATE = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)"  # by ``name``: None if none
# The projects a bulk load left mid-sized, so it builds their indexes with the table's.
_LARGE = text(
    f"SELECT {_KEY} FROM lessons GROUP BY 1 HAVING count(*) >= :n AND count(*) < :share "
    "* (SELECT greatest(reltuples, 1) FROM pg_class WHERE oid = 'lessons'::regclass)"
)


def name(key: int) -> str:
    """The index of project ``key`` (an int from ``lore_scope_key``): its hex, as ``to_hex`` writes it."""
    return f"lessons_embedding_{key & (2**64 - 1):x}"


def create(key: int, *, concurrently: bool = False) -> str:
    how = "CONCURRENTLY IF NOT EXISTS" if concurrently else "IF NOT EXISTS"
    return f"CREATE INDEX {how} {name(key)} ON lessons USING hnsw (embedding vector_cosine_ops) WHERE {_KEY} = {int(key)}"


def build_large(conn: Connection) -> None:
    """In a bulk load's last transaction (its owner's, after ``ANALYZE``): each mid-sized project's."""
    for (key,) in conn.execute(_LARGE, {"n": OWN_ROWS, "share": OWN_SHARE}).all():
        conn.exec_driver_sql(create(key))


class ProjectIndexes:
    """Which projects have their own index; a mid-sized one without gets it built in the background,
    once a process while it fails (logged; tried again after a restart)."""

    def __init__(self, engine: Engine, direct_url: str | None) -> None:
        self._engine, self._url = engine, direct_url
        self._tried: set[int] = set()
        self._lock = threading.Lock()

    def ready(self, conn: Connection, org: str, project: str, rows: int, share: float) -> bool:
        """Whether ``project`` (``rows`` live, ``share`` of the table) has a valid index of its own;
        if mid-sized, it will. One it has keeps serving it as it grows."""
        if rows < OWN_ROWS:
            return False
        key = conn.execute(_KEY_OF, {"org": org, "project": project}).scalar_one()
        valid = conn.exec_driver_sql(_STATE, (name(key),)).scalar()
        with self._lock:
            start = not valid and share < OWN_SHARE and key not in self._tried
            self._tried.add(key)
        if start:
            threading.Thread(target=self._build, args=(key,), name="lore-project-index", daemon=True).start()
        return bool(valid)

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
                conn.execute("SET statement_timeout = 0")
                if valid:  # a dead build's
                    conn.execute(f"DROP INDEX CONCURRENTLY {index}")
                conn.execute(create(key, concurrently=True))
                conn.execute("ANALYZE lessons")  # lest the planner, on older statistics, take it for small
            logger.info("built %s, a project's own vector index", index)
            with self._lock:
                self._tried.discard(key)  # built: if a re-embed's new column drops it, build again
        except psycopg.Error as exc:
            logger.warning("a project's own vector index (%s) was not built: %s", index, exc)
