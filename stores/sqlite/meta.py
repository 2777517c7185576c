"""The local file's ``lore_meta`` revision, vector dimension and model generation, as functions
over the caller's transaction so store, vector cache and model records share them."""

from __future__ import annotations

from stores.engine import embedding_model
from stores.sqlite.db import Connection
from stores.sqlite.sql import LocalSqlTx


def bump_rev(conn: Connection) -> int:
    """The file's next revision, which every write stamps on the rows it touches."""
    row = conn.execute(
        "UPDATE lore_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'rev' RETURNING value"
    ).fetchone()
    return int(row[0])


def stored_dim(conn: Connection) -> int | None:
    """The dimension of the file's vectors; None before the first one."""
    value = embedding_model.get_meta(LocalSqlTx(conn), "dim")
    return int(value) if value is not None else None


def generation(conn: Connection) -> int:
    """The file's model generation (``stores.engine.embedding_model``), read in the caller's transaction."""
    return embedding_model.read_generation(LocalSqlTx(conn))
