"""``stores.engine.sql.SqlTx`` on a SQLAlchemy connection to Postgres: JSON is ``jsonb``, lists
are arrays for ``= ANY``, and ``bounded`` sets ``statement_timeout`` to the deadline's time left."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, CursorResult, text
from sqlalchemy.exc import DBAPIError

from stores import deadline
from stores.engine.json_numbers import jsonb_text

# A bound parameter in the engine's statements (":name", not the second colon of a "::" cast).
_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_QUERY_CANCELED = "57014"  # SQLSTATE query_canceled: what a statement stopped by statement_timeout raises


class PostgresSqlTx:
    """Statements on ``conn``, inside a transaction its caller holds."""

    def __init__(self, conn: Connection, *, bounded: bool = False) -> None:
        self.conn, self._bounded, self._timeout_set = conn, bounded, False

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        result = self._execute(sql, dict(params))
        return [dict(row._mapping) for row in result] if result.returns_rows else []

    def many(self, sql: str, params: Sequence[Mapping[str, Any]]) -> None:
        if params:
            self._execute(sql, [dict(p) for p in params])

    def together(self, writes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """One statement, earlier writes as ``WITH`` parts (each runs once on one snapshot), their
        parameters renamed ``w<i>_<name>`` to not collide."""
        if len(writes) <= 1:
            for sql, params in writes:
                self._execute(sql, dict(params))
            return
        parts: list[str] = []
        bound: dict[str, Any] = {}
        for i, (sql, params) in enumerate(writes):
            if not sql.lstrip().upper().startswith("INSERT"):
                raise ValueError("together() runs INSERT statements only")
            parts.append(_PARAMETER.sub(lambda m, i=i: f":w{i}_{m.group(1)}", sql))  # type: ignore[misc]
            bound.update({f"w{i}_{name}": value for name, value in params.items()})
        head = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(parts[:-1]))
        self._execute(f"WITH {head} {parts[-1]}", bound)

    def json(self, param: str) -> str:
        return f"CAST(:{param} AS jsonb)"

    def dump(self, value: Any) -> str:
        return jsonb_text(value)

    def load(self, value: Any) -> Any:
        return value

    def stamp(self, when: datetime) -> datetime:
        return when

    def time(self, value: datetime) -> datetime:
        return value.astimezone(UTC)

    def in_list(self, column: str, param: str) -> str:
        return f"{column} = ANY(:{param})"

    def listed(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def each(self, param: str) -> str:
        return f"unnest(CAST(:{param} AS text[])) AS e(value)"

    def _execute(self, sql: str, params: Any) -> CursorResult[Any]:
        """``conn.execute``, bounded by the request's deadline when ``bounded``."""
        if self._bounded and not self._timeout_set:
            left = deadline.remaining()
            if left is not None:
                if left <= 0:
                    raise deadline.DeadlineExceeded()
                # The time left in whole milliseconds (computed here, never client text).
                self.conn.execute(
                    text("SELECT set_config('statement_timeout', :ms, true)"),
                    {"ms": str(max(1, int(left * 1000)))},
                )
            self._timeout_set = True
        try:
            return self.conn.execute(text(sql), params)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED:
                raise deadline.DeadlineExceeded() from exc
            raise
