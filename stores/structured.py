"""Structured memory and history, written once over a small per-backend transaction.

A project's tables are a catalog (name, columns, next id) and rows stored as JSON
objects; plans run against an in-memory working copy of the project, which
yields the effects (every row's before and after, every table's definition
before and after), and only then are the changes written, together with the
commit, in the backend's one write transaction. Each backend supplies a
``ProjectTx``: a handful of reads and writes on one project inside one
transaction (``stores.local_structured``, ``stores.postgres_structured``).

Every change to a project is a commit: seq, parent, kind, message, actor, time,
schema hash before and after, and the effects. A commit records its targets
(``table:T``, ``schema:T``, ``row:T:ID``, ``lesson:ID``) so history can be
filtered and a revert can find later commits that touched the same things.

Every loop over rows checks the request's deadline (``stores.deadline``), so a
request that runs too long stops inside its transaction, which then rolls back.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from stores import deadline
from stores.errors import ConflictError, InvalidInputError, NotFoundError, StoreError, UnavailableError
from stores.ids import new_id
from stores.plans import (
    ID_COLUMN,
    MAX_COLUMNS,
    Column,
    Plan,
    PlanError,
    coerce,
    column_def,
    convert,
    filters,
    identifier,
    matches,
    parse_plan,
    risk,
    schema_hash,
    sort_key,
)

LESSONS_TABLE = "lessons"
SNAPSHOT_EVERY = 100
MAX_QUERY_LIMIT = 500


@dataclass(frozen=True)
class Commit:
    id: str
    seq: int
    parent: str | None
    kind: str
    message: str
    actor: str
    created_at: datetime
    schema_hash_before: str
    schema_hash_after: str
    effects: Mapping[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDef:
    columns: tuple[Column, ...]
    next_id: int


class ProjectTx(Protocol):
    """What the engine needs from a backend, inside one transaction on one project."""

    def tables(self) -> dict[str, TableDef]: ...

    def rows(self, table: str) -> dict[int, dict[str, Any]]: ...

    def put_table(self, name: str, table: TableDef | None) -> None:
        """Create, change or (None) drop a table with its rows."""

    def put_rows(self, table: str, changes: Mapping[int, dict[str, Any] | None]) -> None:
        """Insert, replace or (None) delete rows."""

    def last_commit(self) -> tuple[str, int] | None: ...

    def add_commit(self, commit: Commit) -> None: ...

    def get_commit(self, commit_id: str) -> Commit | None: ...

    def later_commits_touching(self, seq: int, targets: list[str]) -> list[str]: ...

    def commits(self, target: str | None, limit: int, before_seq: int | None) -> list[Commit]: ...

    def put_snapshot(self, seq: int, state: dict[str, Any]) -> None: ...

    def restore_lesson(self, lesson_id: str, image: Mapping[str, Any] | None) -> None:
        """Put a lesson back as ``image`` describes it (None: delete it)."""

    def existing_lesson_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` name a lesson already stored in this project (live or expired)."""
        ...

    def org_projects(self) -> list[str]:
        """Every project of this org that has lessons or commits, sorted."""
        ...


def now() -> datetime:
    return datetime.now(UTC)


def current_hash(tx: ProjectTx) -> str:
    return schema_hash({name: list(t.columns) for name, t in tx.tables().items()})


def describe_schema(tx: ProjectTx) -> dict[str, Any]:
    tables = tx.tables()
    return {
        "tables": [
            {
                "name": name,
                "columns": [c.as_dict() for c in (ID_COLUMN, *tables[name].columns)],
                "row_count": len(tx.rows(name)),
            }
            for name in sorted(tables)
        ],
        "schema_hash": schema_hash({name: list(t.columns) for name, t in tables.items()}),
    }


class Workspace:
    """A project's tables as a plan changes them, recording every effect."""

    def __init__(self, tx: ProjectTx) -> None:
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
            copied = {}
            for row_id, values in stored.items():
                deadline.check()
                copied[row_id] = copy.deepcopy(values)
            self._rows[table] = copied
        return self._rows[table]

    def table(self, raw: Any) -> TableDef:
        name = identifier(raw, "table")
        if name not in self.defs:
            raise NotFoundError(f"table {name!r} does not exist in this project.")
        return self.defs[name]

    def set_def(self, name: str, table: TableDef | None) -> None:
        self.tables_before.setdefault(name, self.defs.get(name))
        if table is None:
            self.defs.pop(name, None)
        else:
            self.defs[name] = table

    def set_row(self, table: str, row_id: int, values: dict[str, Any] | None) -> None:
        rows = self.rows(table)
        self.row_before.setdefault((table, row_id), copy.deepcopy(rows.get(row_id)))
        if values is None:
            rows.pop(row_id, None)
        else:
            rows[row_id] = values

    def effects(self) -> dict[str, Any]:
        rows = []
        for (table, row_id), before in self.row_before.items():
            deadline.check()
            after = self._rows.get(table, {}).get(row_id) if table in self.defs else None
            if before != after:
                rows.append({"table": table, "id": row_id, "before": before, "after": after})
        tables = {}
        for name, table_before in self.tables_before.items():
            old, after_def = _columns_json(table_before), _columns_json(self.defs.get(name))
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


def execute(tx: ProjectTx, plan: Plan) -> Workspace:
    ws = Workspace(tx)
    for index, op in enumerate(plan.operations):
        run_operation(ws, index, op)
    return ws


def dry_run(tx: ProjectTx, raw_plan: Mapping[str, Any]) -> dict[str, Any]:
    """What ``apply`` would do, without writing anything."""
    errors: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"rows": {"inserted": 0, "updated": 0, "deleted": 0}, "schema": []}
    level = "low"
    try:
        plan = parse_plan(raw_plan)
        level = risk(plan.operations)
        current = current_hash(tx)
        if plan.base_schema_hash != current:
            errors.append(
                {
                    "index": None,
                    "code": "STALE_PLAN",
                    "message": f"The schema changed since this plan was made; its schema_hash is now {current}. "
                    "Read schema again and rebuild the plan.",
                }
            )
        ws = Workspace(tx)
        for index, op in enumerate(plan.operations):
            try:
                run_operation(ws, index, op)
            except PlanError as exc:
                errors.append({"index": index, "code": error_code(exc.error), "message": str(exc)})
                break
        summary = summarize(ws.effects())
    except UnavailableError:
        raise  # a dry run that could not finish has no verdict to report
    except PlanError as exc:
        errors.append({"index": exc.index, "code": error_code(exc.error), "message": str(exc)})
    except StoreError as exc:
        errors.append({"index": None, "code": error_code(exc), "message": str(exc)})
    return {"ok": not errors, "risk": level, "effects": summary, "errors": errors}


class StalePlanError(ConflictError):
    """The plan was made against another schema; carries the current hash."""

    def __init__(self, current: str) -> None:
        super().__init__(
            f"The schema changed since this plan was made; its schema_hash is now {current}. "
            "Read schema again and rebuild the plan."
        )
        self.current_hash = current


def apply(tx: ProjectTx, raw_plan: Mapping[str, Any], actor: str) -> dict[str, Any]:
    """Validate, check the hash, run, write and record; raises before writing anything."""
    plan = parse_plan(raw_plan)
    before = current_hash(tx)
    if plan.base_schema_hash != before:
        raise StalePlanError(before)
    ws = execute(tx, plan)
    effects = ws.effects()
    commit = write(tx, ws, effects, kind="apply", message=plan.message, actor=actor, hash_before=before)
    return {
        "commit_id": commit.id,
        "seq": commit.seq,
        "schema_hash": commit.schema_hash_after,
        "effects": summarize(effects),
    }


def write(
    tx: ProjectTx,
    ws: Workspace,
    effects: dict[str, Any],
    *,
    kind: str,
    message: str,
    actor: str,
    hash_before: str,
) -> Commit:
    """Persist the workspace's changes and the commit describing them."""
    for name in {*ws.tables_before, *ws.renumbered}:
        tx.put_table(name, ws.defs.get(name))
    changes: dict[str, dict[int, dict[str, Any] | None]] = {}
    for row in effects["rows"]:
        deadline.check()
        changes.setdefault(row["table"], {})[row["id"]] = row["after"]
    for table, table_changes in changes.items():
        if table in ws.defs:
            tx.put_rows(table, table_changes)
    after = schema_hash({name: list(t.columns) for name, t in ws.defs.items()})
    return record(
        tx,
        kind=kind,
        message=message,
        actor=actor,
        effects=effects,
        hash_before=hash_before,
        hash_after=after,
    )


def record(
    tx: ProjectTx,
    *,
    kind: str,
    message: str,
    actor: str,
    effects: dict[str, Any],
    hash_before: str,
    hash_after: str | None = None,
) -> Commit:
    """Add a commit after the project's last one; every 100th also snapshots the tables."""
    last = tx.last_commit()
    commit = Commit(
        id=new_id(),
        seq=(last[1] if last else 0) + 1,
        parent=last[0] if last else None,
        kind=kind,
        message=message,
        actor=actor,
        created_at=now(),
        schema_hash_before=hash_before,
        schema_hash_after=hash_after or hash_before,
        effects=effects,
        targets=targets_of(effects),
    )
    tx.add_commit(commit)
    if commit.seq % SNAPSHOT_EVERY == 0:
        tables = tx.tables()
        tx.put_snapshot(
            commit.seq,
            {
                name: {"columns": _columns_json(t), "next_id": t.next_id, "rows": tx.rows(name)}
                for name, t in tables.items()
            },
        )
    return commit


def record_lessons(tx: ProjectTx, kind: str, actor: str, changes: list[Any]) -> Commit:
    """The commit for lesson changes: (lesson id, before image, after image) each."""
    effects = {
        "rows": [{"table": LESSONS_TABLE, "id": i, "before": b, "after": a} for i, b, a in changes],
        "schema": [],
        "tables": {},
    }
    return record(tx, kind=kind, message=kind, actor=actor, effects=effects, hash_before=current_hash(tx))


def read_only_lessons(lesson_id: str, image: Any) -> None:
    """The lesson restorer of a transaction that must not restore lessons."""
    raise AssertionError("lessons are restored only inside a write transaction")


def revert(tx: ProjectTx, commit_id: str, actor: str) -> dict[str, Any]:
    """A new commit undoing ``commit_id``; CONFLICT when later commits touched the same things."""
    target = tx.get_commit(commit_id)
    if target is None:
        raise NotFoundError(f"No commit {commit_id} in this project.")
    later = tx.later_commits_touching(target.seq, conflict_targets(targets_of(target.effects)))
    if later:
        raise ConflictError(
            f"Commit {commit_id} cannot be reverted: later commits changed the same rows or tables "
            f"({', '.join(later[:20])}{f' and {len(later) - 20} more' if len(later) > 20 else ''}). "
            "Revert those first, newest first."
        )
    before = current_hash(tx)
    ws = Workspace(tx)
    lesson_effects = []
    # By name: Postgres ``jsonb`` keeps object keys in its own order (shortest first), SQLite
    # JSON text in the order written, and the revert's effects list tables in this order.
    tables = dict(sorted(target.effects.get("tables", {}).items()))
    # Tables come back first (so their rows can), rows next, and tables the commit
    # created go last (so their rows are recorded as deleted).
    for name, change in tables.items():
        if change["before"] is not None:
            ws.set_def(name, _table_from_json(change["before"], ws.defs.get(name)))
            ws.schema.append({"op": "restore_table", "table": name})
    for row in reversed(target.effects.get("rows", [])):
        deadline.check()
        if row["table"] == LESSONS_TABLE:
            tx.restore_lesson(row["id"], row["before"])
            lesson_effects.append(
                {"table": LESSONS_TABLE, "id": row["id"], "before": row["after"], "after": row["before"]}
            )
        elif row["table"] in ws.defs:
            ws.set_row(row["table"], row["id"], copy.deepcopy(row["before"]))
    for name, change in tables.items():
        if change["before"] is None and name in ws.defs:
            for row_id in list(ws.rows(name)):
                ws.set_row(name, row_id, None)
            ws.set_def(name, None)
            ws.schema.append({"op": "drop_table", "table": name})
    effects = ws.effects()
    effects["rows"] = lesson_effects + effects["rows"]
    commit = write(
        tx, ws, effects, kind="revert", message=f"Revert {commit_id}", actor=actor, hash_before=before
    )
    return {
        "commit_id": commit.id,
        "seq": commit.seq,
        "reverted": commit_id,
        "schema_hash": commit.schema_hash_after,
        "effects": summarize(effects),
    }


@dataclass(frozen=True)
class TableRows:
    """One table's columns and rows as read inside a transaction, to be queried after it."""

    name: str
    columns: tuple[Column, ...]
    rows: Mapping[int, Mapping[str, Any]]


def read_table(tx: ProjectTx, table: Any) -> TableRows:
    """The table ``query_rows`` reads: the only part of a query that needs the database."""
    name = identifier(table, "table")
    tables = tx.tables()
    if name not in tables:
        raise NotFoundError(f"table {name!r} does not exist in this project.")
    return TableRows(name=name, columns=tables[name].columns, rows=tx.rows(name))


def query_rows(
    tx: ProjectTx, table: Any, where: Any, order_by: Any, limit: int, cursor: str | None
) -> dict[str, Any]:
    """Rows of one table, filtered and ordered (``read_table`` then ``select_rows``)."""
    return select_rows(read_table(tx, table), where, order_by, limit, cursor)


def select_rows(
    table: TableRows, where: Any, order_by: Any, limit: int, cursor: str | None
) -> dict[str, Any]:
    """Rows of a table already read, filtered and ordered.

    Pure Python, so it may run after the read transaction has ended: a slow filter
    then holds no connection or lock that other calls are waiting for.
    The cursor holds the sort values of the last row returned (and its id), not an
    offset, so rows deleted or added between pages make no later row go missing.
    """
    columns = {c.name: c for c in (ID_COLUMN, *table.columns)}
    conditions = filters(where, columns)
    keys = _ordering(order_by, columns)
    if not 1 <= limit <= MAX_QUERY_LIMIT:
        raise InvalidInputError(f"limit must be between 1 and {MAX_QUERY_LIMIT}.")
    after = _decode_cursor(cursor, len(keys)) if cursor is not None else None
    rows = []
    for row_id, values in table.rows.items():
        deadline.check()
        row = {"id": row_id, **values}
        if matches(row, conditions):
            rows.append(row)
    for column, descending in reversed(keys):
        rows.sort(key=functools.partial(_sort_key_of, column=column), reverse=descending)
    if after is not None:
        rows = [r for r in rows if _after([r.get(c) for c, _ in keys], after, keys)]
    page = rows[:limit]
    for row in page:
        for col in table.columns:
            row.setdefault(col.name, None)
    more = len(rows) > limit
    next_cursor = _encode_cursor([page[-1].get(c) for c, _ in keys]) if more else None
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


def summarize(effects: Mapping[str, Any]) -> dict[str, Any]:
    counts = {"inserted": 0, "updated": 0, "deleted": 0}
    for row in effects.get("rows", []):
        if row["before"] is None:
            counts["inserted"] += 1
        elif row["after"] is None:
            counts["deleted"] += 1
        else:
            counts["updated"] += 1
    return {"rows": counts, "schema": list(effects.get("schema", []))}


def targets_of(effects: Mapping[str, Any]) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for name in effects.get("tables", {}):
        found[f"schema:{name}"] = None
        found[f"table:{name}"] = None
    for row in effects.get("rows", []):
        if row["table"] == LESSONS_TABLE:
            found[f"lesson:{row['id']}"] = None
        else:
            found[f"table:{row['table']}"] = None
            found[f"row:{row['table']}:{row['id']}"] = None
    return tuple(found)


def conflict_targets(targets: tuple[str, ...]) -> list[str]:
    """What a later commit must not have touched for a commit with ``targets`` to be reverted."""
    out = []
    for target in targets:
        kind, _, rest = target.partition(":")
        if kind == "schema":
            out.append(f"table:{rest}")  # any later use of a table whose shape this changed
        elif kind in ("row", "lesson"):
            out.append(target)
            if kind == "row":
                out.append(f"schema:{rest.rsplit(':', 1)[0]}")
    return sorted(set(out))


def error_code(error: StoreError) -> str:
    if isinstance(error, StalePlanError):
        return "STALE_PLAN"
    if isinstance(error, NotFoundError):
        return "NOT_FOUND"
    if isinstance(error, ConflictError):
        return "CONFLICT"
    return "VALIDATION_ERROR"


# -- operations ---------------------------------------------------------------------


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
    name = identifier(op.get("table"), "table")
    ws.table(name)
    for row_id in list(ws.rows(name)):
        ws.set_row(name, row_id, None)
    ws.set_def(name, None)
    ws.schema.append({"op": "drop_table", "table": name})


def _add_column(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
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
    ws.set_def(name, TableDef(columns=(*table.columns, column), next_id=table.next_id))
    if column.default is not None:
        for row_id, values in list(rows.items()):
            ws.set_row(name, row_id, {**values, column.name: column.default})
    ws.schema.append({"op": "add_column", "table": name, "column": column.as_dict()})


def _drop_column(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
    column = _existing_column(table, op.get("column"), name)
    ws.set_def(
        name,
        TableDef(columns=tuple(c for c in table.columns if c.name != column.name), next_id=table.next_id),
    )
    _rewrite_rows(ws, name, lambda v: {k: x for k, x in v.items() if k != column.name})
    ws.schema.append({"op": "drop_column", "table": name, "column": column.name})


def _rename_column(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
    old = _existing_column(table, op.get("from"), name)
    new = identifier(op.get("to"), "column")
    if any(c.name == new for c in table.columns):
        raise ConflictError(f"table {name!r} already has a column {new!r}.")
    columns = tuple(
        Column(new, c.type, c.nullable, c.default) if c.name == old.name else c for c in table.columns
    )
    ws.set_def(name, TableDef(columns=columns, next_id=table.next_id))
    _rewrite_rows(ws, name, lambda v: {(new if k == old.name else k): x for k, x in v.items()})
    ws.schema.append({"op": "rename_column", "table": name, "from": old.name, "to": new})


def _alter_column_type(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
    old = _existing_column(table, op.get("column"), name)
    new_type = op.get("type")
    if new_type not in ("text", "integer", "real", "boolean", "json", "timestamp"):
        raise InvalidInputError(
            f"type {new_type!r} is not one of text, integer, real, boolean, json, timestamp."
        )
    default = convert(old.default, new_type, old.name)
    columns = tuple(
        Column(c.name, new_type, c.nullable, default) if c.name == old.name else c for c in table.columns
    )
    ws.set_def(name, TableDef(columns=columns, next_id=table.next_id))

    def converted(values: dict[str, Any]) -> dict[str, Any]:
        if values.get(old.name) is None:
            return values
        return {**values, old.name: convert(values[old.name], new_type, old.name)}

    _rewrite_rows(ws, name, converted)
    ws.schema.append(
        {"op": "alter_column_type", "table": name, "column": old.name, "from": old.type, "to": new_type}
    )


def _insert(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
    rows = op.get("rows")
    if not isinstance(rows, list) or not rows:
        raise InvalidInputError("insert needs rows: a non-empty list of objects.")
    next_id = table.next_id
    for position, raw in enumerate(rows):
        deadline.check()
        values = _row_values(table, raw, f"row {position}", fill=True)
        ws.set_row(name, next_id, values)
        next_id += 1
    ws.defs[name] = TableDef(columns=table.columns, next_id=next_id)
    ws.renumbered.add(name)


def _update(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
    conditions = filters(op.get("where"), _columns(table))
    changes = _row_values(table, op.get("set"), "set", fill=False)
    if not changes:
        raise InvalidInputError("update needs set: an object of column values.")
    for row_id, values in list(ws.rows(name).items()):
        deadline.check()
        if matches({"id": row_id, **values}, conditions):
            ws.set_row(name, row_id, {**values, **changes})


def _delete(ws: Workspace, op: Mapping[str, Any]) -> None:
    table = ws.table(op.get("table"))
    name = op["table"]
    conditions = filters(op.get("where"), _columns(table))
    for row_id, values in list(ws.rows(name).items()):
        deadline.check()
        if matches({"id": row_id, **values}, conditions):
            ws.set_row(name, row_id, None)


_OPERATIONS: dict[str, Callable[[Workspace, Mapping[str, Any]], None]] = {
    "create_table": _create_table,
    "drop_table": _drop_table,
    "add_column": _add_column,
    "drop_column": _drop_column,
    "rename_column": _rename_column,
    "alter_column_type": _alter_column_type,
    "insert": _insert,
    "update": _update,
    "delete": _delete,
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
        for col in table.columns:
            if values.get(col.name) is None and col.default is not None and col.name not in raw:
                values[col.name] = col.default
    for key, value in values.items():
        if value is None and not columns[key].nullable:
            raise InvalidInputError(f"{what}: column {key!r} cannot be null.")
    if fill:
        missing = [c.name for c in table.columns if not c.nullable and values.get(c.name) is None]
        if missing:
            raise InvalidInputError(f"{what}: column {missing[0]!r} is required.")
    return values


def _rewrite_rows(ws: Workspace, table: str, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    for row_id, values in list(ws.rows(table).items()):
        deadline.check()
        new = fn(values)
        if new != values:
            ws.set_row(table, row_id, new)


def _existing_column(table: TableDef, raw: Any, table_name: str) -> Column:
    name = identifier(raw, "column")
    for col in table.columns:
        if col.name == name:
            return col
    raise NotFoundError(f"table {table_name!r} has no column {name!r}.")


def _columns(table: TableDef) -> dict[str, Column]:
    return {c.name: c for c in (ID_COLUMN, *table.columns)}


def _ordering(raw: Any, columns: Mapping[str, Column]) -> list[tuple[str, bool]]:
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


def _columns_json(table: TableDef | None) -> dict[str, Any] | None:
    if table is None:
        return None
    return {"columns": [c.as_dict() for c in table.columns], "next_id": table.next_id}


def _table_from_json(data: Mapping[str, Any], current: TableDef | None) -> TableDef:
    columns = tuple(Column(**c) for c in data["columns"])
    # Ids are never reused, even across a revert.
    next_id = max(data["next_id"], current.next_id if current else 0)
    return TableDef(columns=columns, next_id=next_id)


# A history cursor is the sequence number of the last commit shown, as ASCII digits.
# ``str.isdigit`` would also take "²" (which ``int`` refuses) and "١٢" (read as 12).
_HISTORY_CURSOR = re.compile(r"[0-9]{1,12}")


def parse_cursor(cursor: str | None) -> int | None:
    """The sequence number a ``history`` cursor holds; anything else is the caller's mistake."""
    if cursor is None:
        return None
    if not _HISTORY_CURSOR.fullmatch(cursor):
        raise InvalidInputError(
            "cursor is not one this server returned; pass next_cursor from a previous page."
        )
    return int(cursor)


def _sort_key_of(row: dict[str, Any], *, column: str) -> tuple[Any, ...]:
    """A row's sort key on one column (``plans.sort_key`` orders mixed types)."""
    return sort_key(row.get(column))
