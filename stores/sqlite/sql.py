"""``stores.engine.sql.SqlTx`` on a SQLite connection (which binds ``:name`` itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stores.sqlite.db import Connection


class LocalSqlTx:
    """Statements on ``conn``, inside a transaction its caller holds."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        cur = self.conn.execute(sql, params)
        if cur.description is None:
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
