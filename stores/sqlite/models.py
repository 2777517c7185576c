"""The local file's model record and re-embedding: one transaction rebuilds the vectors (``swap``),
so no reader sees two models mixed, and a killed run keeps its committed batches."""

from __future__ import annotations

import contextlib

import numpy as np

from stores.engine.sql import SqlTx
from stores.sqlite.connections import LocalConnections
from stores.sqlite.migrations import VECTOR_COLUMNS
from stores.sqlite.sql import LocalSqlTx
from stores.sqlite.vectors import MAX_DIMENSION


class LocalModelDb:
    """``ModelDb`` on the file's connections: every step a plain read or write under the lock."""

    max_dimension = MAX_DIMENSION
    row_lock = ""

    def __init__(self, conns: LocalConnections) -> None:
        self._conns = conns

    def owner(self, *, write: bool) -> contextlib.AbstractContextManager[LocalSqlTx]:
        return self._conns.statements(write=write)

    # One writer, no owner and no row-level security on a file: every transaction is alike.
    record = every_org = owner

    def vector(self, vec: np.ndarray) -> bytes:
        return vec.tobytes()

    def swap(self, tx: SqlTx, dimension: int) -> None:
        """Rebuild the vectors and bump the revision, so every process's index reloads."""
        del dimension  # a BLOB takes any
        tx.rows("DROP TABLE IF EXISTS lesson_embeddings", {})
        tx.rows(f"CREATE TABLE lesson_embeddings ({VECTOR_COLUMNS})", {})
        tx.rows(
            "INSERT INTO lesson_embeddings (pk, embedding) "
            "SELECT r.pk, r.embedding FROM lesson_reembed AS r JOIN lessons AS l ON l.pk = r.pk",
            {},
        )
        tx.rows("UPDATE lore_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'rev'", {})

    def swapped(self, dimension: int) -> None:
        """Nothing: each process's index sees the new generation on its next read."""

    def changed(self) -> None:
        """Nothing: the index reloads on a new generation by itself."""
