"""``stores.engine.sql.SqlTx`` on a SQLAlchemy connection to Postgres."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, text


class PostgresSqlTx:
    """Statements on ``conn``, inside a transaction its caller holds."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        result = self.conn.execute(text(sql), dict(params))
        return [dict(row._mapping) for row in result] if result.returns_rows else []
