"""``SqlTx`` on SQLite: JSON and times (fixed-width UTC) are text, a list a JSON array (``json_each``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from stores.sqlite.db import Connection, format_ts


class LocalSqlTx:
    """Statements on ``conn``, inside a transaction its caller holds."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Mapping[str, Any] | Sequence[Any]) -> list[dict[str, Any]]:
        """``SqlTx.rows``; ``params`` by name, or by position for a statement of ``?`` marks."""
        cur = self.conn.execute(sql, params)
        if cur.description is None:
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def many(self, sql: str, params: Sequence[Mapping[str, Any]]) -> None:
        self.conn.executemany(sql, params)

    def together(self, writes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        # In process: no round trip to save, so one after another (refusing what Postgres would).
        if any(not sql.lstrip().upper().startswith("INSERT") for sql, _ in writes):
            raise ValueError("together() runs INSERT statements only")
        for sql, params in writes:
            self.conn.execute(sql, params)

    def json(self, param: str) -> str:
        return f":{param}"

    def dump(self, value: Any) -> str:
        return json.dumps(value)

    def load(self, value: str) -> Any:
        return json.loads(value)

    def stamp(self, when: datetime) -> str:
        return format_ts(when)

    def time(self, value: str) -> datetime:
        return datetime.fromisoformat(value)

    def in_list(self, column: str, param: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(:{param}))"

    def listed(self, values: Sequence[Any]) -> str:
        return json.dumps(list(values))

    def each(self, param: str) -> str:
        return f"json_each(:{param})"
