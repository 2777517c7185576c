"""Reading a table's rows, filtered, ordered and paged, for ``query_rows``; filtering runs after
the read transaction, so a slow filter holds no connection or lock."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stores import deadline
from stores.engine.filters import filters, matches
from stores.engine.plans import ID_COLUMN, Column, sort_key
from stores.engine.structured import ProjectTx
from stores.engine.workspace import Workspace, ordering
from stores.errors import InvalidInputError

MAX_QUERY_LIMIT = 500


@dataclass(frozen=True)
class TableRows:
    """One table's columns and rows as read inside a transaction, to be queried after it."""

    name: str
    columns: tuple[Column, ...]
    rows: Mapping[int, Mapping[str, Any]]


def read_table(tx: ProjectTx, table: Any) -> TableRows:
    """The table ``query_rows`` reads: the only part of a query that needs the database."""
    name, found = Workspace(tx).table(table)  # checked as a plan's table name is
    return TableRows(name=name, columns=found.columns, rows=tx.rows(name))


def select_rows(
    table: TableRows, where: Any, order_by: Any, limit: int, cursor: str | None
) -> dict[str, Any]:
    """Rows already read, filtered and ordered; the cursor is the last row's sort values and id,
    not an offset, so changes between pages make no row go missing."""
    columns = {c.name: c for c in (ID_COLUMN, *table.columns)}
    conditions = filters(where, columns)
    keys = ordering(order_by, columns)
    if not 1 <= limit <= MAX_QUERY_LIMIT:
        raise InvalidInputError(f"limit must be between 1 and {MAX_QUERY_LIMIT}.")
    after = _decode_cursor(cursor, len(keys)) if cursor is not None else None
    rows = []
    for row_id, values in deadline.checked(table.rows.items()):
        row = {"id": row_id, **values}
        if matches(row, conditions):
            rows.append(row)
    for column, descending in reversed(keys):
        rows.sort(key=lambda row: sort_key(row.get(column)), reverse=descending)
    if after is not None:
        rows = [r for r in rows if _after([r.get(c) for c, _ in keys], after, keys)]
    page = rows[:limit]
    for row in page:
        for col in table.columns:
            row.setdefault(col.name, None)
    next_cursor = _encode_cursor([page[-1].get(c) for c, _ in keys]) if len(rows) > limit else None
    return {"rows": page, "next_cursor": next_cursor}


def _after(values: list[Any], cursor: list[Any], keys: list[tuple[str, bool]]) -> bool:
    """Whether a row with these sort values comes after the cursor's row."""
    for mine, theirs, (_, descending) in zip(values, cursor, keys, strict=True):
        a, b = sort_key(mine), sort_key(theirs)
        if a == b:
            continue
        try:
            return (a > b) != descending
        except TypeError:
            raise InvalidInputError(
                "cursor does not fit this table any more; start again without it."
            ) from None
    return False


def _encode_cursor(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str, size: int) -> list[Any]:
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, UnicodeError, RecursionError):
        values = None
    if not isinstance(values, list) or len(values) != size:
        raise InvalidInputError(
            "cursor is not one this server returned for this query; pass next_cursor back."
        )
    return values
