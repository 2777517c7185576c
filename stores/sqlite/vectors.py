"""The local file's vectors: float32 BLOBs in ``lesson_embeddings``, searched by an in-memory
``VectorIndex`` that refreshes rows newer than its revision (writes bump ``lore_meta.rev``, deletes
leave tombstones), so other processes' writes show on the next read."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stores.engine.lessons import Scope
from stores.engine.vector_index import IndexedRow, VectorIndex
from stores.engine.vectors import check_dimension
from stores.errors import InvalidInputError
from stores.sqlite import meta
from stores.sqlite.migrations import VECTOR_COLUMNS

if TYPE_CHECKING:
    from sqlite3 import Connection  # sqlean's at run time (``stores.sqlite.db``)

MAX_DIMENSION = 4096
_INDEXED = "SELECT pk, org_id, project, expires_at, confidence FROM lessons"  # what the index keeps
_VECTORS = "SELECT e.pk, e.embedding FROM lesson_embeddings AS e"


def scope_key(scope: Scope) -> str:
    return f"{scope.org}\x1f{scope.project}"


class LocalVectors:
    """The vector table's dimension and the process's index of it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: VectorIndex | None = None
        self._rev = 0
        self._generation = 0

    def ensure_dim(self, conn: Connection, dim: int) -> int:
        """The vector table is created with the first vector's dimension; others are refused."""
        stored = meta.stored_dim(conn)
        if stored is None:
            check_dimension(dim, MAX_DIMENSION)
            conn.execute(f"CREATE TABLE lesson_embeddings ({VECTOR_COLUMNS})")
            meta.put_dim(conn, dim)
            return dim
        if stored != dim:
            raise InvalidInputError(
                f"This store holds {stored}-dimension vectors but got {dim}: the database was created "
                "with a different embedding model. Use that model, or a new database file."
            )
        return stored

    def search(
        self, conn: Connection, scope: Scope, vec: np.ndarray, k: int, **filters: Any
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest live lessons of ``scope`` (``VectorIndex.search``'s filters)."""
        dim = meta.stored_dim(conn)
        if dim is None:
            return []
        if vec.shape[0] != dim:
            raise InvalidInputError(
                f"This store holds {dim}-dimension vectors but the query vector has {vec.shape[0]}: "
                "the database was created with a different embedding model."
            )
        with self._lock:
            index = self._synced(conn, dim)
            return index.search(scope_key(scope), vec, k, **filters)

    def nearest_many(
        self, conn: Connection, scope: Scope, vectors: Sequence[np.ndarray], **filters: Any
    ) -> list[list[tuple[int, float]]]:
        """Each vector's nearest lessons in ``scope`` (``VectorIndex.nearest_many``)."""
        dim = meta.stored_dim(conn)
        if not vectors or dim is None:
            return [[] for _ in vectors]
        with self._lock:
            index = self._synced(conn, dim)
            return index.nearest_many(scope_key(scope), np.stack(vectors), **filters)

    def similarities(self, keys: Sequence[int], vec: np.ndarray) -> dict[int, float]:
        """The query's similarity to lessons the index already holds (after a search)."""
        with self._lock:
            return self._index.similarities(keys, vec) if self._index is not None else {}

    def vectors(self, keys: Sequence[int]) -> tuple[list[int], np.ndarray] | None:
        """The held vectors of ``keys``; None before the first search loaded the index."""
        with self._lock:
            return self._index.vectors(keys) if self._index is not None else None

    def _synced(self, conn: Connection, dim: int) -> VectorIndex:
        """The index, brought up to the database's revision (caller holds a transaction and the lock)."""
        rev = meta.current_rev(conn)
        generation = meta.generation(conn)
        if self._index is None or generation != self._generation:
            # A re-embed swapped every vector (maybe for another dimension): load them anew.
            self._index, self._rev, self._generation = VectorIndex(dim), 0, generation
        index = self._index
        if rev <= self._rev:
            return index
        if self._rev == 0:
            vectors = dict(conn.execute(_VECTORS))
            entries = _entries(conn.execute(_INDEXED), vectors)
            blob = b"".join(v for _, v in entries)
            index.load([e for e, _ in entries], np.frombuffer(blob, dtype=np.float32))
        else:
            for (pk,) in conn.execute("SELECT pk FROM lesson_tombstones WHERE rev > ?", (self._rev,)):
                index.remove(pk)
            changed = conn.execute(f"{_INDEXED} WHERE rev > ?", (self._rev,)).fetchall()
            vectors = dict(
                conn.execute(f"{_VECTORS} JOIN lessons AS l ON l.pk = e.pk WHERE l.rev > ?", (self._rev,))
            )
            for entry, vec in _entries(changed, vectors):
                index.upsert(entry, np.frombuffer(vec, dtype=np.float32))
        self._rev = rev
        return index


def _entries(rows: Iterable[Any], vectors: dict[int, bytes]) -> list[tuple[IndexedRow, bytes]]:
    return [
        (
            IndexedRow(
                key=pk,
                scope=scope_key(Scope(org, project)),
                expires_at=datetime.fromisoformat(expires_at).timestamp() if expires_at else math.inf,
                confidence=confidence,
            ),
            vectors[pk],
        )
        for pk, org, project, expires_at, confidence in rows
        if pk in vectors
    ]
