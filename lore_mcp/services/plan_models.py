"""The plan format as pydantic models, so the input schema shows it. Only shape is checked here:
``stores.engine.plans`` checks the rest per operation, so errors name the failed one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from lore_mcp.redaction import redact
from lore_mcp.services.lesson_input import check_json

ColumnType = Literal["text", "integer", "real", "boolean", "json", "timestamp"]
FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in", "like", "is_null"]
Name = Annotated[str, Field(max_length=500)]
# Any JSON value with every type spelled out: an empty schema accepts the same, but the MCP
# Inspector flags it as constraining nothing.
JsonValue = Annotated[
    Any,
    WithJsonSchema(
        {"anyOf": [{"type": t} for t in ("string", "number", "boolean", "object", "array", "null")]}
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ColumnSpec(_Strict):
    name: Name
    type: ColumnType
    nullable: bool = True
    default: JsonValue = None


class RowFilter(_Strict):
    column: Name
    op: FilterOp
    value: JsonValue = Field(
        None, description="A list for `in`, true/false for `is_null`, a pattern for `like`."
    )


class CreateTable(_Strict):
    op: Literal["create_table"]
    table: Name
    columns: list[ColumnSpec] = Field(description="Every table also gets an integer primary key `id`.")


class DropTable(_Strict):
    op: Literal["drop_table"]
    table: Name


class AddColumn(_Strict):
    op: Literal["add_column"]
    table: Name
    column: ColumnSpec


class DropColumn(_Strict):
    op: Literal["drop_column"]
    table: Name
    column: Name


class RenameColumn(_Strict):
    op: Literal["rename_column"]
    table: Name
    from_: Name = Field(alias="from")
    to: Name


class AlterColumnType(_Strict):
    op: Literal["alter_column_type"]
    table: Name
    column: Name
    type: ColumnType


class Insert(_Strict):
    op: Literal["insert"]
    table: Name
    rows: list[dict[str, Any]] = Field(description="Column values; `id` is assigned by Lore.")


class Update(_Strict):
    op: Literal["update"]
    table: Name
    where: list[RowFilter] = Field(default_factory=list, description="ANDed; empty means every row.")
    set: dict[str, Any]


class Delete(_Strict):
    op: Literal["delete"]
    table: Name
    where: list[RowFilter] = Field(default_factory=list, description="ANDed; empty means every row.")


_SchemaChange = CreateTable | DropTable | AddColumn | DropColumn | RenameColumn | AlterColumnType
Operation = Annotated[_SchemaChange | Insert | Update | Delete, Field(discriminator="op")]


class PlanModel(_Strict):
    """A change to a project's tables, made against the schema_hash that `schema` returned."""

    baseSchemaHash: str = Field(description="schema_hash from the `schema` tool when the plan was made.")
    message: str = Field("", max_length=2000, description="Why: shown in history.")
    operations: list[Operation] = Field(
        min_length=1, max_length=100, description="Run in order, all or nothing."
    )


def check_values(name: str, given: Any) -> None:
    """A plan (``name`` "plan") or ``query_rows``'s ``where`` as ``check_json`` takes it: its frame,
    then each caller's value, so a value's nesting counts from itself, not the plan (five levels less
    for a row value)."""
    values: list[tuple[str, Any]] = []

    def keep(where: str, value: Any) -> None:
        values.append((where, value))

    frame = map_values(given, keep, filters=True) if name == "plan" else filter_values(name, given, keep)
    for where, value in [(name, frame), *values]:
        check_json(where, value)


def map_values(plan: dict[str, Any], fn: Callable[[str, Any], Any], *, filters: bool) -> dict[str, Any]:
    """A copy of ``plan`` with each caller's value replaced by ``fn(path, value)``."""
    if "operations" not in plan:
        return dict(plan)
    operations = [
        _operation(f"plan.operations[{i}]", op, fn, filters) if isinstance(op, dict) else op
        for i, op in enumerate(plan["operations"])
    ]
    return {**plan, "operations": operations}


def _operation(at: str, op: dict[str, Any], fn: Callable[[str, Any], Any], filters: bool) -> dict[str, Any]:
    """One operation of ``map_values``: its rows, new values, filters and column defaults mapped."""

    def cells(where: str, row: Any) -> Any:
        if not isinstance(row, dict):
            return row
        return {key: fn(f"{where}{_step(key)}", value) for key, value in row.items()}

    def column(where: str, spec: Any) -> Any:
        if isinstance(spec, dict) and "default" in spec:
            return {**spec, "default": fn(f"{where}.default", spec["default"])}
        return spec

    op = dict(op)
    if isinstance(op.get("rows"), list):
        op["rows"] = [cells(f"{at}.rows[{j}]", row) for j, row in enumerate(op["rows"])]
    if "set" in op:
        op["set"] = cells(f"{at}.set", op["set"])
    if filters and "where" in op:
        op["where"] = filter_values(f"{at}.where", op["where"], fn)
    if isinstance(op.get("columns"), list):
        op["columns"] = [column(f"{at}.columns[{k}]", c) for k, c in enumerate(op["columns"])]
    if isinstance(op.get("column"), dict):
        op["column"] = column(f"{at}.column", op["column"])
    return op


def _step(key: Any) -> str:
    """A column as a path step: ``.name``, else quoted, redacted, cut (unchecked caller text)."""
    text = str(key)
    return f".{text}" if text.isidentifier() and len(text) <= 63 else f"[{redact(text).text[:40]!r}]"


def filter_values(where: str, conditions: Any, fn: Callable[[str, Any], Any]) -> Any:
    """Row filters with each ``value`` replaced by ``fn(where it sits, value)`` (``where[0].value``)."""
    if not isinstance(conditions, list):
        return conditions
    return [
        {**c, "value": fn(f"{where}[{k}].value", c["value"])} if isinstance(c, dict) and "value" in c else c
        for k, c in enumerate(conditions)
    ]
