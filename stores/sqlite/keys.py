"""Orgs, API keys and the activity log in the local file, on the lesson store's connections and
locks, so key writes queue behind lesson writes rather than contend with them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import sqlean

from stores import deadline
from stores.errors import UnavailableError
from stores.sqlite.connections import LocalConnections
from stores.sqlite.db import write_transaction
from stores.sqlite.sql import LocalSqlTx

TOUCH_WAIT_S = 0.2  # the longest recording a key's use waits for another process's write lock


class LocalKeyDb:
    """``stores.engine.keys.KeyDb`` (and ``ActivityDb``) on one SQLite file's connections."""

    orgs_together = True  # one file, one writer: held entries of every org in one write

    def __init__(self, conns: LocalConnections) -> None:
        self._conns = conns

    def scoped(self, org_id: str, *, write: bool) -> contextlib.AbstractContextManager[LocalSqlTx]:
        del org_id  # one process's file: every statement names its org
        return self._conns.statements(write=write)

    def entries(self, org_id: str) -> contextlib.AbstractContextManager[LocalSqlTx]:
        return self.scoped(org_id, write=True)

    @contextlib.contextmanager
    def lookup(self, key_hash: str) -> Iterator[LocalSqlTx]:
        """Run on every request: an unreadable file is an outage, never "no such key"."""
        del key_hash
        try:
            with self._conns.statements(write=False) as tx:
                yield tx
        except sqlean.OperationalError as exc:
            raise UnavailableError(
                f"The Lore database could not be read to check an API key: {exc}."
            ) from exc

    @contextlib.contextmanager
    def touching(self, org_id: str) -> Iterator[LocalSqlTx | None]:
        """Record a key's use, skipped while the writer is taken: a key check must never queue behind
        a long write for an informative last-used time (the next request records it)."""
        del org_id
        lock = self._conns.write_lock
        if not lock.acquire(blocking=False):
            yield None
            return
        began = False
        try:
            with deadline.limit(TOUCH_WAIT_S), write_transaction(self._conns.writer) as conn:
                began = True
                yield LocalSqlTx(conn)
        except deadline.DeadlineExceeded:
            # Another process holds the file's write lock: skipped, as when this one's is taken.
            if not began:
                yield None
        finally:
            lock.release()
