"""Postgres's side of its model record and re-embedding (``stores.engine.embedding_model``): one
record per database, as every org shares the ``embedding`` column. Re-embedding runs as the owner
with RLS lifted for its transaction only; the swap rebuilds the column and its index."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import ProgrammingError

from stores.engine.embedding_model import read_generation
from stores.engine.sql import SqlTx
from stores.errors import UnavailableError
from stores.postgres.db import transaction, unavailable_on_failure, unbounded
from stores.postgres.dims import EMBEDDING_COLUMN, MAX_DIMENSION, PostgresDims
from stores.postgres.project_index import large_builds
from stores.postgres.sql import PostgresSqlTx

# Where PostgresLessons._begin leaves the generation it read, for the transaction's images.
GENERATION_INFO = "lore_model_generation"
NOT_OWNER = (
    "lore-memory reembed changes every org's vectors, so it must connect as the database role that owns "
    "Lore's tables (the one that ran its migrations); set LORE_DATABASE_URL to that role."
)


class PostgresModelDb:
    """``stores.engine.embedding_model.ModelDb`` in one Postgres database."""

    max_dimension = MAX_DIMENSION
    row_lock = " FOR UPDATE"

    def __init__(self, engine: Engine, dims: PostgresDims) -> None:
        self._engine, self._dims = engine, dims

    @contextlib.contextmanager
    def record(self, *, write: bool) -> Iterator[PostgresSqlTx]:
        with transaction(self._engine, None) as conn:
            if write:  # the lock PostgresDims.ensure takes: no column of another dimension meanwhile
                conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('lore.dim'))"))
            yield PostgresSqlTx(conn)

    @contextlib.contextmanager
    def owner(self, *, write: bool) -> Iterator[PostgresSqlTx]:
        """A transaction as the tables' owner, with no statement time limit (a swap rebuilds an index)."""
        del write  # row locks do the rest
        with unavailable_on_failure(), self._engine.begin() as conn, unbounded(conn):
            yield PostgresSqlTx(conn)

    @contextlib.contextmanager
    def every_org(self, *, write: bool) -> Iterator[PostgresSqlTx]:
        """``owner`` seeing every org, the table locked until commit so no one writes meanwhile."""
        with self.owner(write=write) as tx:
            try:
                tx.conn.exec_driver_sql("ALTER TABLE lessons NO FORCE ROW LEVEL SECURITY")
            except ProgrammingError as exc:
                if isinstance(exc.orig, psycopg.errors.InsufficientPrivilege):
                    raise UnavailableError(NOT_OWNER) from exc
                raise
            yield tx
            tx.conn.exec_driver_sql("ALTER TABLE lessons FORCE ROW LEVEL SECURITY")

    def vector(self, vec: np.ndarray) -> np.ndarray:
        return vec

    def swap(self, tx: SqlTx, dimension: int) -> None:
        """The column made again with ``dimension`` (an int checked by reembed_begin), and the large
        projects' indexes (dropped with the old column)."""
        tx.rows("ALTER TABLE lessons DROP COLUMN IF EXISTS embedding", {})
        tx.rows(EMBEDDING_COLUMN.format(int(dimension)), {})
        tx.rows(
            "UPDATE lessons AS l SET embedding = r.embedding FROM lesson_reembed AS r WHERE r.pk = l.pk", {}
        )
        for statement in (s for build in large_builds(tx) for s in build):  # one after another
            tx.rows(statement, {})

    def swapped(self, dimension: int) -> None:
        self._dims.adopt(dimension)
        # Pooled connections may hold statements prepared against the old column's type.
        self._engine.dispose()

    def changed(self) -> None:
        self._dims.forget()


def generation(conn: Connection) -> int:
    """The store's model generation in ``conn``'s transaction: as ``_begin`` read it, else read now."""
    found = conn.info.get(GENERATION_INFO)
    return int(found) if found is not None else read_generation(PostgresSqlTx(conn))
