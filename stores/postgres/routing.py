"""Where transactions go: the primary, a read replica (``LORE_DATABASE_READ_URL``), and the
direct connection for ``LISTEN`` behind a pooler (``LORE_DATABASE_DIRECT_URL``).

Only reads that may lag use the replica: recall, ``list``, read-only project transactions (plan
snapshots are rechecked on the primary). ``get`` (update and merge read through it), activity
reads (they read what they just wrote), writes, keys, model, counts and notices stay primary."""

from __future__ import annotations

from sqlalchemy import Engine

from stores.postgres.db import engine_for


def open_engines(
    url: str, pool_size: int, *, read_url: str | None, direct_url: str | None
) -> tuple[Engine, Engine]:
    """The primary's and the reads' engines (one without a replica); ``direct_url``: both obey pooler rules."""
    pooled = direct_url is not None
    primary = engine_for(url, pool_size, pooled=pooled)
    return primary, engine_for(read_url, pool_size, pooled=pooled) if read_url else primary


def dispose(primary: Engine, reads: Engine) -> None:
    if reads is not primary:
        reads.dispose()
    primary.dispose()
