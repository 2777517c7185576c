"""Structured memory and history, written once over a small per-backend transaction (``ProjectTx``).

Plans run on an in-memory copy of a project's tables; the effects (rows' and definitions' before and
after) are written with their commit, which records its targets (``table:T``, ``schema:T``,
``row:T:ID``, ``lesson:ID``) so history filters and a revert finds later commits touching them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stores import deadline
from stores.engine.activity import ActivityNote
from stores.engine.plans import ID_COLUMN, Plan, PlanError, parse_plan, risk, schema_hash
from stores.engine.project_rows import Commit as Commit
from stores.engine.project_rows import ProjectTx as ProjectTx
from stores.engine.workspace import TableDef, TableSource, Workspace, columns_json, run_operation
from stores.errors import ConflictError, NotFoundError, StoreError, UnavailableError
from stores.ids import new_id

LESSONS_TABLE = "lessons"
SNAPSHOT_EVERY = 100


def tables_hash(tables: Mapping[str, TableDef]) -> str:
    return schema_hash({name: list(t.columns) for name, t in tables.items()})


def current_hash(tx: TableSource) -> str:
    return tables_hash(tx.tables())


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
        "schema_hash": tables_hash(tables),
    }


def execute(tx: TableSource, plan: Plan, step: Callable[[int], None] | None = None) -> Workspace:
    """Run the plan's operations in order; ``step(index)`` after each (a caller's progress)."""
    ws = Workspace(tx)
    for index, op in enumerate(plan.operations):
        run_operation(ws, index, op)
        if step is not None:
            step(index)
    return ws


def dry_run(tx: TableSource, raw_plan: Mapping[str, Any]) -> dict[str, Any]:
    """What ``apply`` would do, without writing anything."""
    errors: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"rows": {"inserted": 0, "updated": 0, "deleted": 0}, "schema": []}
    level = "low"
    try:
        plan = parse_plan(raw_plan)
        level = risk(plan.operations)
        current = current_hash(tx)
        if plan.base_schema_hash != current:
            errors.append({"index": None, "code": "STALE_PLAN", "message": str(StalePlanError(current))})
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


@dataclass(frozen=True)
class Snapshot:
    """The tables a plan names and the last commit: a plan runs outside any transaction so its work
    (seconds when large) holds no connection or lock, then ``apply_snapshot`` writes it."""

    defs: dict[str, TableDef]
    table_rows: dict[str, dict[int, dict[str, Any]]]
    last: tuple[str, int] | None

    def tables(self) -> dict[str, TableDef]:
        return self.defs

    def rows(self, table: str) -> dict[int, dict[str, Any]]:
        return self.table_rows.get(table, {})


def snapshot(tx: ProjectTx, raw_plan: Mapping[str, Any]) -> Snapshot:
    """The tables ``raw_plan`` names (all, if not a plan), the last commit read first: a commit
    between reads (each sees what is committed by then) then makes the snapshot stale."""
    last = tx.last_commit()
    tables = tx.tables()
    ops = raw_plan.get("operations") if isinstance(raw_plan, Mapping) else None
    # A table name of the wrong type is refused when the plan runs.
    named = [op.get("table") for op in ops if isinstance(op, Mapping)] if isinstance(ops, list) else None
    rows = {name: tx.rows(name) for name in tables if named is None or name in named}
    return Snapshot(dict(tables), rows, last)


def apply(tx: ProjectTx, raw_plan: Mapping[str, Any], actor: str) -> dict[str, Any]:
    """Validate, check the hash, run, write and record; raises before writing anything."""
    return write_applied(tx, *run_plan(tx, raw_plan), actor)


def run_plan(
    source: TableSource, raw_plan: Mapping[str, Any], step: Callable[[int], None] | None = None
) -> tuple[Plan, str, Workspace]:
    """Parse the plan, check its hash against ``source`` and run it there; writes nothing."""
    plan = parse_plan(raw_plan)
    before = current_hash(source)
    if plan.base_schema_hash != before:
        raise StalePlanError(before)
    return plan, before, execute(source, plan, step)


def apply_snapshot(
    tx: ProjectTx, snap: Snapshot, ran: tuple[Plan, str, Workspace], raw_plan: Mapping[str, Any], actor: str
) -> dict[str, Any]:
    """Write the plan's result on ``snap``, or rerun it in ``tx`` (holding the writer for the whole
    plan) if an unseen commit changed the schema or a table it read."""
    if tx.last_commit() != snap.last:
        read = [f"table:{name}" for name in snap.table_rows]
        since = snap.last[1] if snap.last else 0
        if current_hash(tx) != ran[1] or (read and tx.later_commits_touching(since, read)):
            return apply(tx, raw_plan, actor)
    return write_applied(tx, *ran, actor)


def write_applied(tx: ProjectTx, plan: Plan, before: str, ws: Workspace, actor: str) -> dict[str, Any]:
    effects = ws.effects()
    commit = record(tx, effects, kind="apply", message=plan.message, actor=actor, hash_before=before, ws=ws)
    return {
        "commit_id": commit.id,
        "seq": commit.seq,
        "schema_hash": commit.schema_hash_after,
        "effects": summarize(effects),
    }


def _persist(tx: ProjectTx, ws: Workspace, effects: dict[str, Any]) -> None:
    """Write the workspace's changed tables and rows."""
    for name in {*ws.tables_before, *ws.renumbered}:
        tx.put_table(name, ws.defs.get(name))
    changes: dict[str, dict[int, dict[str, Any] | None]] = {}
    for row in deadline.checked(effects["rows"]):
        changes.setdefault(row["table"], {})[row["id"]] = row["after"]
    for table, table_changes in changes.items():
        if table in ws.defs:
            tx.put_rows(table, table_changes)


def record(
    tx: ProjectTx,
    effects: dict[str, Any],
    *,
    kind: str,
    message: str,
    actor: str,
    hash_before: str,
    ws: Workspace | None = None,
    activity: ActivityNote | None = None,
) -> Commit:
    """Add a commit (and ``activity``) after ``ws``'s changes; each ``SNAPSHOT_EVERY``-th snapshots tables."""
    if ws is not None:
        _persist(tx, ws, effects)
    last = tx.last_commit()
    commit = Commit(
        id=new_id(),
        seq=(last[1] if last else 0) + 1,
        parent=last[0] if last else None,
        kind=kind,
        message=message,
        actor=actor,
        created_at=datetime.now(UTC),
        schema_hash_before=hash_before,
        schema_hash_after=tables_hash(ws.defs) if ws is not None else hash_before,
        effects=effects,
        targets=targets_of(effects),
    )
    tx.add_commit(commit, activity)
    if commit.seq % SNAPSHOT_EVERY == 0:
        tables = tx.tables().items()
        state = {n: {"columns": columns_json(t), "next_id": t.next_id, "rows": tx.rows(n)} for n, t in tables}
        tx.put_snapshot(commit.seq, state)
    return commit


def record_lessons(
    tx: ProjectTx, kind: str, actor: str, changes: list[Any], activity: ActivityNote | None = None
) -> Commit:
    """The commit for lesson changes, each (id, before image, after image)."""
    rows = [{"table": LESSONS_TABLE, "id": i, "before": b, "after": a} for i, b, a in changes]
    effects = {"rows": rows, "schema": [], "tables": {}}
    return record(
        tx, effects, kind=kind, message=kind, actor=actor, hash_before=current_hash(tx), activity=activity
    )


def read_only_lessons(lesson_id: str, image: Any) -> None:
    """The lesson restorer of a transaction that must not restore lessons."""
    raise AssertionError("lessons are restored only inside a write transaction")


def summarize(effects: Mapping[str, Any]) -> dict[str, Any]:
    counts = {"inserted": 0, "updated": 0, "deleted": 0}
    for row in effects.get("rows", []):
        counts["inserted" if row["before"] is None else "deleted" if row["after"] is None else "updated"] += 1
    return {"rows": counts, "schema": list(effects.get("schema", []))}


def targets_of(effects: Mapping[str, Any]) -> tuple[str, ...]:
    found: list[str] = []
    for name in effects.get("tables", {}):
        found += [f"schema:{name}", f"table:{name}"]
    for row in effects.get("rows", []):
        table, row_id = row["table"], row["id"]
        found += (
            [f"lesson:{row_id}"] if table == LESSONS_TABLE else [f"table:{table}", f"row:{table}:{row_id}"]
        )
    return tuple(dict.fromkeys(found))


def error_code(error: StoreError) -> str:
    codes = ((StalePlanError, "STALE_PLAN"), (NotFoundError, "NOT_FOUND"), (ConflictError, "CONFLICT"))
    return next((code for kind, code in codes if isinstance(error, kind)), "VALIDATION_ERROR")
