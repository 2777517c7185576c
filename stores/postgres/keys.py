"""Orgs, API keys and the activity log in Postgres: calls set ``lore.org`` for RLS, but the digest
lookup (before an org is known) sets ``lore.key_hash``, and its policy shows just that row."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy import Engine, text

from stores.postgres.db import transaction, unavailable_on_failure
from stores.postgres.sql import PostgresSqlTx


class PostgresKeyDb:
    """``stores.engine.keys.KeyDb`` (and ``ActivityDb``) on the engine of a ``PostgresLessons``."""

    orgs_together = False  # row-level security checks each row's org: one transaction per org

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextlib.contextmanager
    def scoped(self, org_id: str, *, write: bool) -> Iterator[PostgresSqlTx]:
        del write  # row locks do the rest
        with transaction(self._engine, org_id) as conn:
            yield PostgresSqlTx(conn)

    @contextlib.contextmanager
    def entries(self, org_id: str) -> Iterator[PostgresSqlTx]:
        """Held entries, ``synchronous_commit`` off for a short commit: a crash may lose them, not memory."""
        settings = "set_config('lore.org', :org, true), set_config('synchronous_commit', 'off', true)"
        with unavailable_on_failure(), self._engine.begin() as conn:
            conn.execute(text(f"SELECT {settings}"), {"org": org_id})
            yield PostgresSqlTx(conn)

    @contextlib.contextmanager
    def lookup(self, key_hash: str) -> Iterator[PostgresSqlTx]:
        with transaction(self._engine, None) as conn:
            conn.execute(text("SELECT set_config('lore.key_hash', :h, true)"), {"h": key_hash})
            yield PostgresSqlTx(conn)

    def touching(self, org_id: str) -> contextlib.AbstractContextManager[PostgresSqlTx]:
        return self.scoped(org_id, write=True)
