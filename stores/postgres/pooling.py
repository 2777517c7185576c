"""Lore behind a transaction-mode pooler such as PgBouncer (``LORE_DATABASE_DIRECT_URL``).

A server connection is lent per transaction, so nothing may outlive one: prepared statements would
be missing on the next (PgBouncer 1.18 does not track them), and session settings (``SET ROLE``)
would stay on one server connection. So each transaction sets role and timeouts itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Engine, event

# The connection record's ``info`` key holding the role each transaction takes (or None).
ROLE_INFO = "lore.role"
# psycopg prepares a statement its connection ran five times; through the pooler, never.
CONNECT_ARGS: dict[str, Any] = {"prepare_threshold": None}


def settings_per_transaction(engine: Engine, session: Mapping[str, str]) -> None:
    """Set ``session`` and the role locally per transaction: one more statement, the pooler's price."""

    def on_begin(conn: Connection) -> None:
        settings = dict(session)
        role = conn.info.get(ROLE_INFO)
        if role:
            settings["role"] = role
        dbapi_conn: Any = conn.connection.dbapi_connection  # psycopg's, which begins on its own
        if not settings or dbapi_conn is None:
            return
        calls = ", ".join("set_config(%s, %s, true)" for _ in settings)
        with dbapi_conn.cursor() as cur:
            cur.execute(f"SELECT {calls}", [part for item in settings.items() for part in item])

    event.listen(engine, "begin", on_begin)
