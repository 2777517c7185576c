"""A project's tables in memory while a plan's operations change them, recording every effect
so a dry run and an apply report alike and a revert knows what to undo."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from stores import deadline
from stores.engine.filters import filters, matches
from stores.engine.plans import (
    ID_COLUMN,
    MAX_COLUMNS,
    OPERATIONS,
    TYPES,
    Column,
    PlanError,
    coerce,
    column_def,
    convert,
    identifier,
)
from stores.errors import ConflictError, InvalidInputError, NotFoundError, StoreError, UnavailableError


class TableSource(Protocol):
    """Where a workspace reads a project's tables: a transaction, or a snapshot read from one."""

    def tables(self) -> dict[str, TableDef]: ...

    def rows(self, table: str) -> dict[int, dict[str, Any]]: ...


@dataclass(frozen=True)
class TableDef:
    columns: tuple[Column, ...]
    next_id: int


class Workspace:
    """A project's tables as a plan changes them, recording every effect."""

    def __init__(self, tx: TableSource) -> None:
        self.tx = tx
        self.defs: dict[str, TableDef] = dict(tx.tables())
        self.tables_before: dict[str, TableDef | None] = {}
        self._rows: dict[str, dict[int, dict[str, Any]]] = {}
        self.row_before: dict[tuple[str, int], dict[str, Any] | None] = {}
        self.schema: list[dict[str, Any]] = []
        self.renumbered: set[str] = set()  # tables whose next id moved (inserts)

    def rows(self, table: str) -> dict[int, dict[str, Any]]:
        if table not in self._rows:
            stored = self.tx.rows(table) if table in self.tx.tables() else {}
            self._rows[table] = {row_id: copy.deepcopy(v) for row_id, v in deadline.checked(stored.items())}
        return self._rows[table]

    def table(self, raw: Any) -> tuple[str, TableDef]:
        """A table the plan names, checked, and its definition."""
        name = identifier(raw, "table")
        if name not in self.defs:
            raise NotFoundError(f"table {name!r} does not exist in this project.")
        return name, self.defs[name]

    def column(self, op: Mapping[str, Any], key: str) -> tuple[str, TableDef, Column]:
        """The table ``op`` names, its definition, and its column ``op[key]`` names, checked."""
        name, table = self.table(op.get("table"))
        column = identifier(op.get(key), "column")
        for col in table.columns:
            if col.name == column:
                return name, table, col
        raise NotFoundError(f"table {name!r} has no column {column!r}.")

    def set_def(self, name: str, table: TableDef | None) -> None:
        self.tables_before.setdefault(name, self.defs.get(name))
        if table is None:
            self.defs.pop(name, None)
        else:
            self.defs[name] = table

    def drop_table(self, name: str) -> None:
        """Delete the table's rows (each recorded as deleted), then the table."""
        for row_id in list(self.rows(name)):
            self.set_row(name, row_id, None)
        self.set_def(name, None)
        self.schema.append({"op": "drop_table", "table": name})

    def set_row(self, table: str, row_id: int, values: dict[str, Any] | None) -> None:
        rows = self.rows(table)
        self.row_before.setdefault((table, row_id), copy.deepcopy(rows.get(row_id)))
        if values is None:
            rows.pop(row_id, None)
        else:
            rows[row_id] = values

    def effects(self) -> dict[str, Any]:
        rows = []
        for (table, row_id), before in deadline.checked(self.row_before.items()):
            after = self._rows.get(table, {}).get(row_id) if table in self.defs else None
            if before != after:
                rows.append({"table": table, "id": row_id, "before": before, "after": after})
        tables = {}
        for name, table_before in self.tables_before.items():
            old, after_def = columns_json(table_before), columns_json(self.defs.get(name))
            if (old and old["columns"]) != (after_def and after_def["columns"]):
                tables[name] = {"before": old, "after": after_def}
        return {"rows": rows, "schema": self.schema, "tables": tables}


def run_operation(ws: Workspace, index: int, op: Mapping[str, Any]) -> None:
    deadline.check()
    try:
        _OPERATIONS[op["op"]](ws, op)
    except (PlanError, UnavailableError):  # the deadline or the database, not this operation
        raise
    except StoreError as exc:
        raise PlanError(index, exc) from None


def _create_table(ws: Workspace, op: Mapping[str, Any]) -> None:
    name = identifier(op.get("table"), "table")
    if name in ws.defs:
        raise ConflictError(f"table {name!r} already exists.")
    raw = op.get("columns")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_COLUMNS:
        raise InvalidInputError(f"create_table needs columns: a list of 1 to {MAX_COLUMNS} columns.")
    columns = [column_def(c) for c in raw]
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"table {name!r} names a column twice.")
    ws.set_def(name, TableDef(columns=tuple(columns), next_id=1))
    ws.schema.append({"op": "create_table", "table": name, "columns": [c.as_dict() for c in columns]})


def _drop_table(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, _ = ws.table(op.get("table"))
    ws.drop_table(name)


def _add_column(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table = ws.table(op.get("table"))
    column = column_def(op.get("column"))
    if any(c.name == column.name for c in table.columns):
        raise ConflictError(f"table {name!r} already has a column {column.name!r}.")
    if len(table.columns) >= MAX_COLUMNS:
        raise InvalidInputError(f"table {name!r} already has {MAX_COLUMNS} columns.")
    rows = ws.rows(name)
    if rows and not column.nullable and column.default is None:
        raise InvalidInputError(
            f"column {column.name!r} is not nullable and has no default, but table {name!r} has rows; give a default."
        )
    ws.set_def(name, replace(table, columns=(*table.columns, column)))
    if column.default is not None:
        for row_id, values in list(rows.items()):
            ws.set_row(name, row_id, {**values, column.name: column.default})
    ws.schema.append({"op": "add_column", "table": name, "column": column.as_dict()})


def _drop_column(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table, column = ws.column(op, "column")
    _set_column(ws, name, table, column.name, None)
    _rewrite_rows(ws, name, lambda _, v: {k: x for k, x in v.items() if k != column.name})
    ws.schema.append({"op": "drop_column", "table": name, "column": column.name})


def _rename_column(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table, old = ws.column(op, "from")
    new = identifier(op.get("to"), "column")
    if any(c.name == new for c in table.columns):
        raise ConflictError(f"table {name!r} already has a column {new!r}.")
    _set_column(ws, name, table, old.name, replace(old, name=new))
    _rewrite_rows(ws, name, lambda _, v: {(new if k == old.name else k): x for k, x in v.items()})
    ws.schema.append({"op": "rename_column", "table": name, "from": old.name, "to": new})


def _alter_column_type(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table, old = ws.column(op, "column")
    new_type = op.get("type")
    if new_type not in TYPES:
        raise InvalidInputError(f"type {new_type!r} is not one of {', '.join(TYPES)}.")
    default = convert(old.default, new_type, old.name)
    _set_column(ws, name, table, old.name, replace(old, type=new_type, default=default))

    def converted(_: int, values: dict[str, Any]) -> dict[str, Any]:
        if values.get(old.name) is None:
            return values
        return {**values, old.name: convert(values[old.name], new_type, old.name)}

    _rewrite_rows(ws, name, converted)
    ws.schema.append(
        {"op": "alter_column_type", "table": name, "column": old.name, "from": old.type, "to": new_type}
    )


def _insert(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table = ws.table(op.get("table"))
    rows = op.get("rows")
    if not isinstance(rows, list) or not rows:
        raise InvalidInputError("insert needs rows: a non-empty list of objects.")
    for position, raw in deadline.checked(enumerate(rows)):
        ws.set_row(name, table.next_id + position, _row_values(table, raw, f"row {position}", fill=True))
    ws.defs[name] = replace(table, next_id=table.next_id + len(rows))
    ws.renumbered.add(name)


def _update(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table = ws.table(op.get("table"))
    conditions = filters(op.get("where"), _columns(table))
    changes = _row_values(table, op.get("set"), "set", fill=False)
    if not changes:
        raise InvalidInputError("update needs set: an object of column values.")
    # Not _rewrite_rows: a json value set to True where it was 1 compares equal, yet changes.
    for row_id, values in deadline.checked(list(ws.rows(name).items())):
        if matches({"id": row_id, **values}, conditions):
            ws.set_row(name, row_id, {**values, **changes})


def _delete(ws: Workspace, op: Mapping[str, Any]) -> None:
    name, table = ws.table(op.get("table"))
    conditions = filters(op.get("where"), _columns(table))
    _rewrite_rows(ws, name, lambda i, v: None if matches({"id": i, **v}, conditions) else v)


# Each of ``plans.OPERATIONS`` by the function above named after it.
_OPERATIONS: dict[str, Callable[[Workspace, Mapping[str, Any]], None]] = {
    op: globals()[f"_{op}"] for op in OPERATIONS
}


def _row_values(table: TableDef, raw: Any, what: str, *, fill: bool) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{what} must be an object of column values.")
    columns = {c.name: c for c in table.columns}
    if "id" in raw:
        raise InvalidInputError(f"{what}: id is assigned by Lore and cannot be set.")
    unknown = [k for k in raw if k not in columns]
    if unknown:
        raise NotFoundError(f"{what}: no column {unknown[0]!r} in this table.")
    values = {k: coerce(v, columns[k].type, k) for k, v in raw.items()}
    if fill:
        defaults = {c.name: c.default for c in table.columns if c.default is not None and c.name not in raw}
        values.update(defaults)
    for key, value in values.items():
        if value is None and not columns[key].nullable:
            raise InvalidInputError(f"{what}: column {key!r} cannot be null.")
    if fill:
        missing = [c.name for c in table.columns if not c.nullable and values.get(c.name) is None]
        if missing:
            raise InvalidInputError(f"{what}: column {missing[0]!r} is required.")
    return values


def _rewrite_rows(
    ws: Workspace, table: str, fn: Callable[[int, dict[str, Any]], dict[str, Any] | None]
) -> None:
    """Give each row of ``table`` the values ``fn(id, values)`` returns (None: delete it)."""
    for row_id, values in deadline.checked(list(ws.rows(table).items())):
        new = fn(row_id, values)
        if new != values:
            ws.set_row(table, row_id, new)


def _set_column(ws: Workspace, name: str, table: TableDef, old: str, new: Column | None) -> None:
    """Table ``name`` with its column ``old`` replaced by ``new`` (None: dropped)."""
    columns = (new if c.name == old else c for c in table.columns)
    ws.set_def(name, replace(table, columns=tuple(c for c in columns if c is not None)))


def _columns(table: TableDef) -> dict[str, Column]:
    return {c.name: c for c in (ID_COLUMN, *table.columns)}


def ordering(raw: Any, columns: Mapping[str, Column]) -> list[tuple[str, bool]]:
    if raw is None or raw == []:
        return [("id", False)]
    if not isinstance(raw, list):
        raise InvalidInputError("order_by must be a list of {column, direction}.")
    keys = []
    for item in raw:
        if not isinstance(item, Mapping) or item.get("column") not in columns:
            raise InvalidInputError("order_by names a column that is not in this table.")
        direction = item.get("direction", "asc")
        if direction not in ("asc", "desc"):
            raise InvalidInputError("order_by direction must be asc or desc.")
        keys.append((item["column"], direction == "desc"))
    return [*keys, ("id", False)]


def columns_json(table: TableDef | None) -> dict[str, Any] | None:
    if table is None:
        return None
    return {"columns": [c.as_dict() for c in table.columns], "next_id": table.next_id}


def table_from_json(data: Mapping[str, Any], current: TableDef | None) -> TableDef:
    columns = tuple(Column(**c) for c in data["columns"])
    # Ids are never reused, even across a revert.
    return TableDef(columns=columns, next_id=max(data["next_id"], current.next_id if current else 0))
