"""The local file's ``lore_meta`` entries: its revision, vector dimension and model generation.

Module functions over a connection the caller holds a transaction on, so the store, its
vector cache and its model records each read them without reaching into one another.
"""

from __future__ import annotations

from stores.engine.embedding_model import GENERATION_KEY
from stores.sqlite.db import Connection


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM lore_meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def put_meta(conn: Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO lore_meta (key, value) VALUES (?, ?)", (key, value))


def bump_rev(conn: Connection) -> int:
    """The file's next revision, which every write stamps on the rows it touches."""
    row = conn.execute(
        "UPDATE lore_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'rev' RETURNING value"
    ).fetchone()
    return int(row[0])


def current_rev(conn: Connection) -> int:
    return int(conn.execute("SELECT value FROM lore_meta WHERE key = 'rev'").fetchone()[0])


def stored_dim(conn: Connection) -> int | None:
    """The dimension of the file's vectors; None before the first one."""
    value = get_meta(conn, "dim")
    return int(value) if value is not None else None


def generation(conn: Connection) -> int:
    """The file's model generation (``stores.engine.embedding_model``), read in the caller's transaction."""
    value = get_meta(conn, GENERATION_KEY)
    return int(value) if value is not None else 0
