"""The local file's vectors: float32 BLOBs in ``lesson_embeddings``, searched by an in-memory int8
``VectorIndex`` (its candidates rescored from the BLOBs) that refreshes rows newer than its revision (writes
bump ``lore_meta.rev``, deletes leave tombstones), so other processes' writes show on the next read."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stores.engine.embedding_model import put_meta
from stores.engine.lessons import Scope
from stores.engine.vector_index import IndexedRow, VectorIndex
from stores.engine.vectors import check_dimension, check_query, unit_vector
from stores.errors import InvalidInputError
from stores.sqlite import meta
from stores.sqlite.migrations import VECTOR_COLUMNS
from stores.sqlite.sql import LocalSqlTx

if TYPE_CHECKING:
    from sqlite3 import Connection  # sqlean's at run time (``stores.sqlite.db``)

MAX_DIMENSION = 4096
_BATCH = 1024  # rows loaded into the index at a time (small: each leaves its temporaries' heap)
# What the index keeps of each lesson with a vector.
_ROWS = (
    "SELECT l.pk, l.org_id, l.project, l.expires_at, l.confidence, e.embedding "
    "FROM lessons AS l JOIN lesson_embeddings AS e ON e.pk = l.pk"
)


def scope_key(scope: Scope) -> str:
    return f"{scope.org}\x1f{scope.project}"


class LocalVectors:
    """The vector table's dimension and the process's index of it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: VectorIndex | None = None
        self._rev, self._generation = 0, 0

    def ensure_dim(self, conn: Connection, dim: int) -> None:
        """The vector table is created with the first vector's dimension; others are refused."""
        stored = meta.stored_dim(conn)
        if stored is None:
            check_dimension(dim, MAX_DIMENSION)
            conn.execute(f"CREATE TABLE lesson_embeddings ({VECTOR_COLUMNS})")
            put_meta(LocalSqlTx(conn), "dim", str(dim))
        elif stored != dim:
            raise InvalidInputError(
                f"This store holds {stored}-dimension vectors but got {dim}: the database was created "
                "with a different embedding model. Use that model, or a new database file."
            )

    def search(
        self, conn: Connection, scope: Scope, vec: np.ndarray, k: int, **filters: Any
    ) -> tuple[list[tuple[int, float]], dict[int, np.ndarray]]:
        """The ``k`` nearest live lessons of ``scope`` (``VectorIndex.search``'s filters), exactly:
        the index's candidates rescored with their stored float32 vectors, which come too, by key."""
        dim = meta.stored_dim(conn)
        if dim is None:
            return [], {}
        check_query(dim, vec.shape[0])
        with self._lock:
            pool = self._synced(conn, dim).search(scope_key(scope), vec, k, **filters)
        stored = self.vectors(conn, [key for key, _ in pool])
        sims = (np.array(list(stored.values())) @ unit_vector(vec)).tolist() if stored else []
        return _best(dict(zip(stored, sims, strict=True)), k), stored

    def nearest_many(
        self,
        conn: Connection,
        scope: Scope,
        vectors: Sequence[np.ndarray],
        *,
        k: int,
        min_similarity: float,
        now: float,
    ) -> list[list[tuple[int, float]]]:
        """Each vector's ``k`` nearest live lessons in ``scope`` at ``min_similarity`` or more."""
        dim = meta.stored_dim(conn)
        if not vectors or dim is None:
            return [[] for _ in vectors]
        with self._lock:
            index = self._synced(conn, dim)
            pools = index.nearest_many(
                scope_key(scope), np.stack(vectors), now=now, min_similarity=min_similarity
            )
        stored = self.vectors(conn, {key for pool in pools for key, _ in pool})
        out: list[list[tuple[int, float]]] = []
        for vec, pool in zip(vectors, pools, strict=True):
            if not pool:
                out.append([])
                continue
            sims = np.array([stored[key] for key, _ in pool]) @ unit_vector(vec)
            exact = {key: float(s) for (key, _), s in zip(pool, sims, strict=True) if s >= min_similarity}
            out.append(_best(exact, k))
        return out

    @staticmethod
    def vectors(conn: Connection, keys: Collection[int]) -> dict[int, np.ndarray]:
        """The stored vectors of ``keys`` made unit length, by key (those without one left out)."""
        if not keys:  # a store that never held a vector has no table to read
            return {}
        sql = "SELECT pk, embedding FROM lesson_embeddings WHERE pk IN (SELECT value FROM json_each(?))"
        if not (rows := conn.execute(sql, (json.dumps(list(keys)),)).fetchall()):
            return {}
        matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        return dict(zip((pk for pk, _ in rows), unit, strict=True))

    def _synced(self, conn: Connection, dim: int) -> VectorIndex:
        """The index, brought up to the database's revision (caller holds a transaction and the lock)."""
        rev = int(conn.execute("SELECT value FROM lore_meta WHERE key = 'rev'").fetchone()[0])
        generation = meta.generation(conn)
        if self._index is None or generation != self._generation:
            # A re-embed swapped every vector (maybe for another dimension): load them anew.
            self._index, self._rev, self._generation = VectorIndex(dim), 0, generation
        index = self._index
        if rev <= self._rev:
            return index
        index.remove(
            [pk for (pk,) in conn.execute("SELECT pk FROM lesson_tombstones WHERE rev > ?", (self._rev,))]
        )
        # The first load takes every row (a scan, not the rev index); later ones the newer rows.
        cursor = conn.execute(f"{_ROWS} WHERE l.rev > ?", (self._rev,)) if self._rev else conn.execute(_ROWS)
        # In batches, so a first load holds one batch's rows, not the whole file's vectors twice.
        while batch := cursor.fetchmany(_BATCH):
            blob = b"".join(row[-1] for row in batch)
            index.put(
                [_indexed(*row[:-1]) for row in batch],
                np.frombuffer(blob, np.float32).reshape(len(batch), dim),
            )
        self._rev = rev
        return index


def _indexed(pk: int, org: str, project: str, expires_at: str | None, confidence: float) -> IndexedRow:
    expires = datetime.fromisoformat(expires_at).timestamp() if expires_at else math.inf
    return IndexedRow(key=pk, scope=scope_key(Scope(org, project)), expires_at=expires, confidence=confidence)


def _best(similarities: dict[int, float], k: int) -> list[tuple[int, float]]:
    """The ``k`` most similar, best first (ties by key, so the order is stable)."""
    return sorted(similarities.items(), key=lambda p: (-p[1], p[0]))[:k]
