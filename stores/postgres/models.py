"""The Postgres store's record of its embedding model, and re-embedding it: ``ModelRecords``.

One record for the whole database (``lore_meta``), since every org shares the one
``embedding`` column and its dimension. Re-embedding works on every org's lessons, so
its transactions run as the tables' owner with row-level security lifted for that
transaction only (``ALTER TABLE ... NO FORCE ROW LEVEL SECURITY`` is transactional
and put back before commit; no other transaction ever sees it lifted). The swap at the
end is one transaction that rebuilds the column (its dimension may change) and its
HNSW index from ``lesson_reembed``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import ProgrammingError

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
from stores.errors import ConflictError, InvalidInputError, UnavailableError
from stores.postgres.db import as_owner, transaction, unavailable_on_failure
from stores.postgres.dims import MAX_DIMENSION, PostgresDims

# Where PostgresLessonStore._begin leaves the generation it read, for the transaction's images.
GENERATION_INFO = "lore_model_generation"
# Lessons still without a new vector, or whose text changed since it was computed.
_PENDING = "FROM lessons AS l LEFT JOIN lesson_reembed AS r ON r.pk = l.pk WHERE (r.pk IS NULL OR r.stamp <> l.updated_at)"
NOT_OWNER = (
    "lore-memory reembed changes every org's vectors, so it must connect as the database role that owns "
    "Lore's tables (the one that ran its migrations); set LORE_DATABASE_URL to that role."
)


class PostgresModelRecords:
    """``stores.engine.embedding_model.ModelRecords`` in one Postgres database."""

    def __init__(self, engine: Engine, dims: PostgresDims) -> None:
        self._engine = engine
        self._dims = dims
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
        with transaction(self._engine, None) as conn:
            return self._read(conn)[0]

    def adopt(self, model: EmbeddingModel) -> EmbeddingModel:
        known = self._known
        if known is not None:
            return known[0]
        with transaction(self._engine, None) as conn:
            current, generation = self._read(conn)
            if _adoptable(current, model):
                # The lock PostgresDims.ensure takes: no vector column appears with another dimension meanwhile.
                conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('lore.dim'))"))
                current, generation = self._read(conn)
                if _adoptable(current, model):
                    _put_meta(conn, MODEL_KEY, model.to_json())
                    current = model
        assert current is not None
        if current.recorded:
            self._known = (current, generation)
        return current

    def generation(self, conn: Connection) -> int:
        """The store's model generation: as ``_begin`` read it, else read now."""
        found = conn.info.get(GENERATION_INFO)
        if found is not None:
            return int(found)
        return _generation(conn)

    def guard(self, conn: Connection) -> int:
        """Inside a ``_begin`` transaction that writes or compares vectors: ``ModelChangedError``
        when the store was re-embedded since this process read its model; else the generation."""
        current = self.generation(conn)
        known = self._known
        if known is not None and known[1] != current:
            self._known = None
            self._dims.forget()
            raise ModelChangedError()
        return current

    # -- re-embedding ----------------------------------------------------------------

    def reembed_target(self) -> EmbeddingModel | None:
        with self._as_owner() as conn:
            found = _get_meta(conn, TARGET_KEY)
        return EmbeddingModel.from_json(found) if found is not None else None

    def reembed_cancel(self) -> None:
        with self._as_owner() as conn:
            conn.execute(text("DELETE FROM lesson_reembed"))
            conn.execute(text("DELETE FROM lore_meta WHERE key = :k"), {"k": TARGET_KEY})

    def reembed_begin(self, target: EmbeddingModel) -> ReembedProgress:
        if not 1 <= target.dimension <= MAX_DIMENSION:
            raise InvalidInputError(
                f"A vector must have between 1 and {MAX_DIMENSION} dimensions, not {target.dimension}."
            )
        with self._every_org() as conn:
            if _get_meta(conn, TARGET_KEY) != target.to_json():
                conn.execute(text("DELETE FROM lesson_reembed"))  # half of a run towards another model
                _put_meta(conn, TARGET_KEY, target.to_json())
            total = conn.execute(text("SELECT count(*) FROM lessons")).scalar_one()
            pending = conn.execute(text(f"SELECT count(*) {_PENDING}")).scalar_one()
        return ReembedProgress(done=total - pending, total=total)

    def reembed_pending(self, limit: int, after: int = 0) -> list[ReembedRow]:
        with self._every_org() as conn:
            rows = conn.execute(
                text(
                    f"SELECT l.pk, l.problem, l.resolution, l.updated_at {_PENDING} AND l.pk > :after "
                    "ORDER BY l.pk LIMIT :n"
                ),
                {"n": limit, "after": after},
            ).all()
        return [ReembedRow(pk=pk, problem=p, resolution=r, stamp=stamp) for pk, p, r, stamp in rows]

    def reembed_put(
        self, target: EmbeddingModel, rows: Sequence[tuple[ReembedRow, Sequence[float] | np.ndarray]]
    ) -> None:
        values = [
            {"pk": row.pk, "stamp": row.stamp, "v": _vector(vector, target.dimension)} for row, vector in rows
        ]
        if not values:
            return
        with self._as_owner() as conn:
            _check_target(conn, target)
            conn.execute(
                text(
                    "INSERT INTO lesson_reembed (pk, stamp, embedding) VALUES (:pk, :stamp, :v) "
                    "ON CONFLICT (pk) DO UPDATE SET stamp = excluded.stamp, embedding = excluded.embedding"
                ),
                values,
            )

    def reembed_finish(self, target: EmbeddingModel) -> int:
        with self._every_org() as conn:
            _check_target(conn, target)
            pending = conn.execute(text(f"SELECT count(*) {_PENDING}")).scalar_one()
            if pending:
                return int(pending)
            generation = _generation(conn) + 1
            # The dimension is an int checked by reembed_begin, never user text.
            conn.exec_driver_sql("DROP INDEX IF EXISTS lessons_embedding")
            conn.exec_driver_sql("ALTER TABLE lessons DROP COLUMN IF EXISTS embedding")
            conn.exec_driver_sql(f"ALTER TABLE lessons ADD COLUMN embedding vector({int(target.dimension)})")
            conn.execute(
                text(
                    "UPDATE lessons AS l SET embedding = r.embedding FROM lesson_reembed AS r WHERE r.pk = l.pk"
                )
            )
            conn.exec_driver_sql(
                "CREATE INDEX lessons_embedding ON lessons USING hnsw (embedding vector_cosine_ops)"
            )
            _put_meta(conn, "dim", str(target.dimension))
            _put_meta(conn, MODEL_KEY, target.to_json())
            _put_meta(conn, GENERATION_KEY, str(generation))
            conn.execute(text("DELETE FROM lore_meta WHERE key = :k"), {"k": TARGET_KEY})
            conn.execute(text("DELETE FROM lesson_reembed"))
        self._dims.adopt(target.dimension)
        self._known = (target, generation)
        # Pooled connections may hold statements prepared against the old column's type.
        self._engine.dispose()
        return 0

    # -- internals -------------------------------------------------------------------

    @contextlib.contextmanager
    def _as_owner(self) -> Iterator[Connection]:
        """A transaction as the tables' owner, with no statement time limit (a swap rebuilds an index)."""
        with unavailable_on_failure(), self._engine.begin() as conn:
            as_owner(conn)
            conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
            yield conn

    @contextlib.contextmanager
    def _every_org(self) -> Iterator[Connection]:
        """``_as_owner`` with every org's lessons visible (see the module docstring).

        Lifting the policy takes the table's strongest lock until commit, so no server
        writes a lesson while the transaction counts, reads or swaps them.
        """
        with self._as_owner() as conn:
            try:
                conn.exec_driver_sql("ALTER TABLE lessons NO FORCE ROW LEVEL SECURITY")
            except ProgrammingError as exc:
                if isinstance(exc.orig, psycopg.errors.InsufficientPrivilege):
                    raise UnavailableError(NOT_OWNER) from exc
                raise
            yield conn
            conn.exec_driver_sql("ALTER TABLE lessons FORCE ROW LEVEL SECURITY")

    def _read(self, conn: Connection) -> tuple[EmbeddingModel | None, int]:
        record = _get_meta(conn, MODEL_KEY)
        if record is not None:
            return EmbeddingModel.from_json(record), _generation(conn)
        dim = _get_meta(conn, "dim")
        return (unrecorded(int(dim)) if dim is not None else None), _generation(conn)


def _adoptable(current: EmbeddingModel | None, model: EmbeddingModel) -> bool:
    """A store with no record adopts a model whose dimension its vectors (if any) have."""
    return current is None or (not current.recorded and current.dimension == model.dimension)


def _check_target(conn: Connection, target: EmbeddingModel) -> None:
    found = conn.execute(
        text("SELECT value FROM lore_meta WHERE key = :k FOR UPDATE"), {"k": TARGET_KEY}
    ).scalar()
    if found != target.to_json():
        raise ConflictError(
            "Another `lore-memory reembed` towards a different model took over this store; "
            "run `lore-memory reembed` again with the model you want."
        )


def _vector(vector: Sequence[float] | np.ndarray, dimension: int) -> Any:
    vec = unit_vector(vector)
    if vec.shape[0] != dimension:
        raise InvalidInputError(
            f"A re-embedded vector has {vec.shape[0]} dimensions, not the model's {dimension}."
        )
    return vec


def _generation(conn: Connection) -> int:
    value = _get_meta(conn, GENERATION_KEY)
    return int(value) if value is not None else 0


def _get_meta(conn: Connection, key: str) -> str | None:
    return conn.execute(text("SELECT value FROM lore_meta WHERE key = :k"), {"k": key}).scalar()


def _put_meta(conn: Connection, key: str, value: str) -> None:
    conn.execute(
        text(
            "INSERT INTO lore_meta (key, value) VALUES (:k, :v) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ),
        {"k": key, "v": value},
    )
