"""The local store's record of its embedding model, and re-embedding it: ``ModelRecords``.

Kept in ``lore_meta`` (see ``stores.engine.embedding_model`` for the keys and the rules).
The new vectors of a re-embed wait in ``lesson_reembed`` until one ``BEGIN IMMEDIATE``
transaction rebuilds the ``lesson_embeddings`` table from them, so no reader ever sees a
mix of two models' vectors, and a killed run keeps every batch it committed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stores.engine.embedding_model import (
    GENERATION_KEY,
    MODEL_KEY,
    TARGET_KEY,
    EmbeddingModel,
    ModelChangedError,
    ReembedProgress,
    ReembedRow,
    unrecorded,
)
from stores.engine.vectors import unit_vector
from stores.errors import ConflictError, InvalidInputError
from stores.sqlite import meta
from stores.sqlite.connections import LocalConnections
from stores.sqlite.db import Connection
from stores.sqlite.meta import get_meta as _get_meta
from stores.sqlite.meta import put_meta as _put_meta
from stores.sqlite.migrations import VECTOR_COLUMNS
from stores.sqlite.vectors import MAX_DIMENSION

# Lessons still without a new vector, or whose text changed since it was computed.
_PENDING = "FROM lessons AS l LEFT JOIN lesson_reembed AS r ON r.pk = l.pk WHERE (r.pk IS NULL OR r.stamp <> l.updated_at)"


class LocalModelRecords:
    """``stores.engine.embedding_model.ModelRecords`` on one SQLite file's connections."""

    def __init__(self, conns: LocalConnections) -> None:
        self._conns = conns
        # The model this process read or adopted, and the generation it read it at.
        self._known: tuple[EmbeddingModel, int] | None = None

    @property
    def known(self) -> EmbeddingModel | None:
        known = self._known
        return known[0] if known is not None else None

    def forget(self) -> None:
        """Drop the cached record, so the next ``adopt`` reads the database again."""
        self._known = None

    def recorded(self) -> EmbeddingModel | None:
        with self._conns.reading() as conn:
            return self._read(conn)[0]

    def adopt(self, model: EmbeddingModel) -> EmbeddingModel:
        known = self._known
        if known is not None:
            return known[0]
        with self._conns.reading() as conn:
            current, generation = self._read(conn)
        if _adoptable(current, model):
            with self._conns.writing() as conn:
                current, generation = self._read(conn)  # again, under the write lock
                if _adoptable(current, model):
                    _put_meta(conn, MODEL_KEY, model.to_json())
                    current = model
        assert current is not None
        if current.recorded:
            self._known = (current, generation)
        return current

    def generation(self, conn: Connection) -> int:
        """The store's model generation, read in the caller's transaction."""
        return meta.generation(conn)

    def guard(self, conn: Connection) -> int:
        """Inside a transaction that writes or compares vectors: ``ModelChangedError`` when the
        store was re-embedded since this process read its model; else the generation."""
        current = self.generation(conn)
        known = self._known
        if known is not None and known[1] != current:
            self._known = None
            raise ModelChangedError()
        return current

    # -- re-embedding ----------------------------------------------------------------

    def reembed_target(self) -> EmbeddingModel | None:
        with self._conns.reading() as conn:
            found = _get_meta(conn, TARGET_KEY)
        return EmbeddingModel.from_json(found) if found is not None else None

    def reembed_cancel(self) -> None:
        with self._conns.writing() as conn:
            conn.execute("DELETE FROM lesson_reembed")
            conn.execute("DELETE FROM lore_meta WHERE key = ?", (TARGET_KEY,))

    def reembed_begin(self, target: EmbeddingModel) -> ReembedProgress:
        if not 1 <= target.dimension <= MAX_DIMENSION:
            raise InvalidInputError(
                f"A vector must have between 1 and {MAX_DIMENSION} dimensions, not {target.dimension}."
            )
        with self._conns.writing() as conn:
            if _get_meta(conn, TARGET_KEY) != target.to_json():
                conn.execute("DELETE FROM lesson_reembed")  # half of a run towards another model
                _put_meta(conn, TARGET_KEY, target.to_json())
            total = conn.execute("SELECT count(*) FROM lessons").fetchone()[0]
            pending = conn.execute(f"SELECT count(*) {_PENDING}").fetchone()[0]
        return ReembedProgress(done=total - pending, total=total)

    def reembed_pending(self, limit: int, after: int = 0) -> list[ReembedRow]:
        with self._conns.reading() as conn:
            rows = conn.execute(
                f"SELECT l.pk, l.problem, l.resolution, l.updated_at {_PENDING} AND l.pk > ? ORDER BY l.pk LIMIT ?",
                (after, limit),
            ).fetchall()
        return [ReembedRow(pk=pk, problem=p, resolution=r, stamp=stamp) for pk, p, r, stamp in rows]

    def reembed_put(
        self, target: EmbeddingModel, rows: Sequence[tuple[ReembedRow, Sequence[float] | np.ndarray]]
    ) -> None:
        values = [(row.pk, row.stamp, _blob(vector, target.dimension)) for row, vector in rows]
        with self._conns.writing() as conn:
            _check_target(conn, target)
            conn.executemany(
                "INSERT OR REPLACE INTO lesson_reembed (pk, stamp, embedding) VALUES (?, ?, ?)", values
            )

    def reembed_finish(self, target: EmbeddingModel) -> int:
        with self._conns.writing() as conn:
            _check_target(conn, target)
            pending = conn.execute(f"SELECT count(*) {_PENDING}").fetchone()[0]
            if pending:
                return int(pending)
            generation = self.generation(conn) + 1
            conn.execute("DROP TABLE IF EXISTS lesson_embeddings")
            conn.execute(f"CREATE TABLE lesson_embeddings ({VECTOR_COLUMNS})")
            conn.execute(
                "INSERT INTO lesson_embeddings (pk, embedding) "
                "SELECT r.pk, r.embedding FROM lesson_reembed AS r JOIN lessons AS l ON l.pk = r.pk"
            )
            _put_meta(conn, "dim", str(target.dimension))
            _put_meta(conn, MODEL_KEY, target.to_json())
            _put_meta(conn, GENERATION_KEY, str(generation))
            conn.execute("DELETE FROM lore_meta WHERE key = ?", (TARGET_KEY,))
            conn.execute("DELETE FROM lesson_reembed")
            meta.bump_rev(conn)
        self._known = (target, generation)
        return 0

    # -- internals -------------------------------------------------------------------

    def _read(self, conn: Connection) -> tuple[EmbeddingModel | None, int]:
        record = _get_meta(conn, MODEL_KEY)
        if record is not None:
            return EmbeddingModel.from_json(record), self.generation(conn)
        dim = _get_meta(conn, "dim")
        return (unrecorded(int(dim)) if dim is not None else None), self.generation(conn)


def _adoptable(current: EmbeddingModel | None, model: EmbeddingModel) -> bool:
    """A store with no record adopts a model whose dimension its vectors (if any) have."""
    return current is None or (not current.recorded and current.dimension == model.dimension)


def _check_target(conn: Connection, target: EmbeddingModel) -> None:
    if _get_meta(conn, TARGET_KEY) != target.to_json():
        raise ConflictError(
            "Another `lore-memory reembed` towards a different model took over this store; "
            "run `lore-memory reembed` again with the model you want."
        )


def _blob(vector: Sequence[float] | np.ndarray, dimension: int) -> bytes:
    vec = unit_vector(vector)
    if vec.shape[0] != dimension:
        raise InvalidInputError(
            f"A re-embedded vector has {vec.shape[0]} dimensions, not the model's {dimension}."
        )
    return vec.tobytes()
