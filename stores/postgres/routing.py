"""Where transactions go: the primary, a read replica (``LORE_DATABASE_READ_URL``), and the
direct connection for ``LISTEN`` behind a pooler (``LORE_DATABASE_DIRECT_URL``).

Only reads that may lag use the replica: recall, ``list``, read-only project transactions (plan
snapshots are rechecked on the primary). ``get`` (update and merge read through it), activity
reads (they read what they just wrote), writes, keys, model, counts and notices stay primary."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from sqlalchemy import Engine

from stores.postgres.db import engine_for


@dataclass(frozen=True)
class Engines:
    """The primary's engine, the reads' engine, and the notices' URL (``None``: the primary's)."""

    primary: Engine
    reads: Engine
    listen_url: str | None
    _replica: ContextVar[bool] = field(default_factory=lambda: ContextVar("lore_replica", default=False))

    @contextlib.contextmanager
    def on_replica(self, wanted: bool = True) -> Iterator[None]:
        """Within it, read transactions of this thread (``reader``) take the replica if ``wanted``."""
        token = self._replica.set(wanted)
        try:
            yield
        finally:
            self._replica.reset(token)

    def reader(self) -> Engine:
        """The engine of a read transaction: the replica's only inside ``on_replica``."""
        return self.reads if self._replica.get() else self.primary

    def dispose(self) -> None:
        if self.reads is not self.primary:
            self.reads.dispose()
        self.primary.dispose()


def open_engines(url: str, pool_size: int, *, read_url: str | None, direct_url: str | None) -> Engines:
    """The engines for ``url``; with ``direct_url`` both go through the pooler's rules."""
    pooled = direct_url is not None
    primary = engine_for(url, pool_size, pooled=pooled)
    reads = engine_for(read_url, pool_size, pooled=pooled) if read_url else primary
    return Engines(primary, reads, direct_url)
