"""The ``embedding`` column's dimension, made with the first vector; one per store, shared by its
transactions and model records, so the cache has one owner to reset after a re-embed."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

from stores.engine.vectors import check_dimension
from stores.errors import InvalidInputError
from stores.postgres.db import as_owner, transaction

MAX_DIMENSION = 2000  # pgvector's HNSW index takes at most 2000 dimensions
# A vector stays in its row (migration 14): TOASTed out of it, an exact scan read four pages a row.
_INLINE = "ALTER COLUMN embedding SET STORAGE MAIN"
EMBEDDING_INLINE = f"ALTER TABLE lessons {_INLINE}"
EMBEDDING_COLUMN = "ALTER TABLE lessons ADD COLUMN embedding vector({}), " + _INLINE  # with its dimension


class PostgresDims:
    """The vector column's dimension: read once, created once, refused when another."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dim: int | None = None

    def forget(self) -> None:
        """Read the dimension again next time (after another process re-embedded)."""
        self._dim = None

    def adopt(self, dim: int) -> None:
        """This process just swapped the column to ``dim`` (a re-embed's finish)."""
        self._dim = dim

    def stored(self, conn: Connection) -> int | None:
        if self._dim is None:
            value = conn.execute(text("SELECT value FROM lore_meta WHERE key = 'dim'")).scalar()
            self._dim = int(value) if value is not None else None
        return self._dim

    def check(self, conn: Connection, dim: int) -> None:
        """In a write transaction the column must exist with ``dim``: creating it would deadlock
        (the owner's ``ALTER TABLE`` waits for this one), so imports call ``ensure`` first."""
        stored = self.stored(conn)
        if stored is None:
            raise InvalidInputError(
                "This database holds no vectors yet; call ensure_dim before restoring lessons."
            )
        if stored != dim:
            self.ensure(dim)  # raises the usual sentence about another embedding model

    def ensure(self, dim: int) -> None:
        """The vector column is created with the first vector's dimension; others are refused."""
        if self._dim is None:
            with transaction(self._engine, None) as conn:
                as_owner(conn)
                conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('lore.dim'))"))
                stored = conn.execute(text("SELECT value FROM lore_meta WHERE key = 'dim'")).scalar()
                if stored is None:
                    stored = check_dimension(dim, MAX_DIMENSION)  # an int, never user text
                    conn.exec_driver_sql(EMBEDDING_COLUMN.format(stored))
                    conn.execute(
                        text("INSERT INTO lore_meta (key, value) VALUES ('dim', :d)"), {"d": str(dim)}
                    )
                self._dim = int(stored)
        if self._dim != dim:
            raise InvalidInputError(
                f"This store holds {self._dim}-dimension vectors but got {dim}: the database was created "
                "with a different embedding model. Use that model, or a new database."
            )
