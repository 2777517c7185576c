"""The plan format as pydantic models, so the tools' input schema shows it to a model.

These check the shape; names, types and values are checked by ``stores.plans`` as
each operation runs, so errors can name the operation that failed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

ColumnType = Literal["text", "integer", "real", "boolean", "json", "timestamp"]
FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in", "like", "is_null"]
Name = Annotated[str, Field(max_length=500)]
# Any JSON value, published as every JSON type spelled out: a schema with no keyword at
# all accepts the same values, but portable-schema checks (the MCP Inspector's) flag it
# as one that constrains nothing. Validation is unchanged: ``Any`` takes whatever came.
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


Operation = Annotated[
    CreateTable
    | DropTable
    | AddColumn
    | DropColumn
    | RenameColumn
    | AlterColumnType
    | Insert
    | Update
    | Delete,
    Field(discriminator="op"),
]


class PlanModel(_Strict):
    """A change to a project's tables, made against the schema_hash that `schema` returned."""

    baseSchemaHash: str = Field(description="schema_hash from the `schema` tool when the plan was made.")
    message: str = Field("", max_length=2000, description="Why: shown in history.")
    operations: list[Operation] = Field(
        min_length=1, max_length=100, description="Run in order, all or nothing."
    )

    def as_plan(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_unset=True)
