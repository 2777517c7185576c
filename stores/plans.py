"""Structured-memory plans: parsing, identifiers, types, filters, risk and the schema hash.

Pure Python with no database, shared by every backend, so a plan means the same
thing everywhere. Agents never send SQL: identifiers are checked against a strict
pattern and a reserved list, values are checked against column types, and row
filters are (column, operator, value) triples evaluated here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stores.errors import InvalidInputError, StoreError

TYPES = ("text", "integer", "real", "boolean", "json", "timestamp")
FILTER_OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "like", "is_null")
OPERATIONS = (
    "create_table",
    "drop_table",
    "add_column",
    "drop_column",
    "rename_column",
    "alter_column_type",
    "insert",
    "update",
    "delete",
)
IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# Names a plan may never use: Lore's own tables and the databases' catalogs.
RESERVED_NAMES = frozenset(
    {"id", "lessons", "commits", "snapshots", "schema_migrations", "information_schema"}
)
RESERVED_PREFIXES = ("sqlite_", "pg_", "lore_", "mem_")
MAX_OPERATIONS = 100
MAX_ROWS_PER_PLAN = 50_000
MAX_COLUMNS = 100
MAX_MESSAGE_CHARS = 2_000


class PlanError(StoreError):
    """An operation of a plan cannot run; ``index`` is its position in the plan."""

    def __init__(self, index: int | None, error: StoreError) -> None:
        where = f"operation {index}: " if index is not None else ""
        super().__init__(f"{where}{error}")
        self.index = index
        self.error = error


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    default: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "nullable": self.nullable, "default": self.default}


ID_COLUMN = Column("id", "integer", nullable=False)


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class Plan:
    base_schema_hash: str
    message: str
    operations: tuple[dict[str, Any], ...]


def parse_plan(raw: Mapping[str, Any]) -> Plan:
    """The plan's envelope; operations are checked one by one as they run."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError("A plan must be a JSON object with baseSchemaHash, message and operations.")
    base = raw.get("baseSchemaHash")
    if not isinstance(base, str) or not re.fullmatch(r"[0-9a-f]{64}", base):
        raise InvalidInputError("baseSchemaHash must be the 64-hex schema_hash returned by schema.")
    message = raw.get("message", "")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInputError(f"message must be text of at most {MAX_MESSAGE_CHARS} characters.")
    operations = raw.get("operations")
    if not isinstance(operations, list) or not operations:
        raise InvalidInputError("operations must be a non-empty list of operations.")
    if len(operations) > MAX_OPERATIONS:
        raise InvalidInputError(f"A plan may hold at most {MAX_OPERATIONS} operations; split it.")
    rows = 0
    for index, op in enumerate(operations):
        if not isinstance(op, Mapping) or op.get("op") not in OPERATIONS:
            raise PlanError(index, InvalidInputError(f"op must be one of {', '.join(OPERATIONS)}."))
        if op["op"] == "insert" and isinstance(op.get("rows"), list):
            rows += len(op["rows"])
    if rows > MAX_ROWS_PER_PLAN:
        raise InvalidInputError(f"A plan may insert at most {MAX_ROWS_PER_PLAN} rows; split it.")
    return Plan(base_schema_hash=base, message=message, operations=tuple(dict(op) for op in operations))


def identifier(value: Any, what: str) -> str:
    """A table or column name, checked; never interpolated into SQL anyway."""
    if not isinstance(value, str) or not IDENTIFIER.match(value):
        shown = value[:60] + "…" if isinstance(value, str) and len(value) > 60 else value
        raise InvalidInputError(
            f"{what} {shown!r} is not a valid name: use lower-case letters, digits and '_', "
            "starting with a letter, at most 63 characters."
        )
    if value in RESERVED_NAMES or value.startswith(RESERVED_PREFIXES):
        raise InvalidInputError(f"{what} {value!r} is reserved; choose another name.")
    return value


def column_def(raw: Any) -> Column:
    if not isinstance(raw, Mapping):
        raise InvalidInputError("A column must be an object with name and type.")
    name = identifier(raw.get("name"), "column")
    col_type = raw.get("type")
    if col_type not in TYPES:
        raise InvalidInputError(f"column {name!r} has type {col_type!r}; use one of {', '.join(TYPES)}.")
    nullable = raw.get("nullable", True)
    if not isinstance(nullable, bool):
        raise InvalidInputError(f"column {name!r}: nullable must be true or false.")
    default = raw.get("default")
    if default is not None:
        default = coerce(default, col_type, name)
    elif not nullable and "default" in raw:
        raise InvalidInputError(f"column {name!r} is not nullable, so its default cannot be null.")
    return Column(name=name, type=col_type, nullable=nullable, default=default)


def coerce(value: Any, col_type: str, column: str) -> Any:
    """A JSON value checked against a column type; timestamps come back as UTC ISO-8601."""
    if value is None:
        return None
    ok = False
    if col_type == "text":
        ok = isinstance(value, str)
    elif col_type == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    elif col_type == "real":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        value = float(value) if ok else value
    elif col_type == "boolean":
        ok = isinstance(value, bool)
    elif col_type == "json":
        ok = True
    elif col_type == "timestamp":
        return timestamp(value, column)
    if not ok:
        raise InvalidInputError(f"column {column!r} is {col_type}; {_show(value)} is not.")
    return value


def convert(value: Any, to_type: str, column: str) -> Any:
    """A stored value converted for alter_column_type, or InvalidInputError naming it."""
    if value is None:
        return None
    try:
        if to_type == "text":
            return value if isinstance(value, str) else json.dumps(value)
        if to_type == "integer":
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, str):
                return int(value.strip())
        if to_type == "real":
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str) and math.isfinite(float(value)):
                return float(value)
        if to_type == "boolean":
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
        if to_type == "json":
            return value
        if to_type == "timestamp" and isinstance(value, str):
            return timestamp(value, column)
        return coerce(value, to_type, column)
    except (ValueError, InvalidInputError):
        pass
    raise InvalidInputError(f"column {column!r}: {_show(value)} cannot become {to_type}.")


def timestamp(value: Any, column: str) -> str:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    raise InvalidInputError(f"column {column!r} is a timestamp; {_show(value)} is not ISO-8601.")


def filters(raw: Any, columns: Mapping[str, Column]) -> list[Filter]:
    """Row filters checked against the table's columns (``id`` included)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidInputError("where must be a list of {column, op, value} filters.")
    out = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise InvalidInputError("each filter must be an object with column, op and value.")
        name = item.get("column")
        if name not in columns:
            raise InvalidInputError(f"filter column {_show(name)} is not a column of this table.")
        op = item.get("op")
        if op not in FILTER_OPS:
            raise InvalidInputError(f"filter op {_show(op)} is not one of {' '.join(FILTER_OPS)}.")
        col = columns[name]
        value = item.get("value")
        if op == "is_null":
            if not isinstance(value, bool):
                raise InvalidInputError("is_null takes true or false as its value.")
        elif op == "in":
            if not isinstance(value, list) or len(value) > 1000:
                raise InvalidInputError("in takes a list of at most 1000 values.")
            value = [coerce(v, col.type, name) for v in value]
        elif op == "like":
            if not isinstance(value, str):
                raise InvalidInputError("like takes a text pattern with % and _.")
        else:
            if value is None:
                raise InvalidInputError(f"{op} null matches nothing; use is_null.")
            value = coerce(value, col.type, name)
        out.append(Filter(column=name, op=op, value=value))
    return out


def matches(row: Mapping[str, Any], conditions: list[Filter]) -> bool:
    """SQL-like semantics: a comparison with null is false; ``like`` ignores case."""
    for f in conditions:
        value = row.get(f.column)
        if f.op == "is_null":
            if (value is None) != f.value:
                return False
            continue
        if value is None:
            return False
        if f.op == "in":
            ok = value in f.value
        elif f.op == "like":
            ok = _like(f.value).fullmatch(str(value)) is not None
        else:
            try:
                ok = _COMPARE[f.op](value, f.value)
            except TypeError:  # json values of different kinds do not order
                ok = False
        if not ok:
            return False
    return True


def sort_key(value: Any) -> tuple[int, Any]:
    """Nulls last; values of one column share a type so they order naturally."""
    if value is None:
        return (1, 0)
    if isinstance(value, dict | list):
        return (0, json.dumps(value, sort_keys=True))
    return (0, value)


def risk(operations: tuple[dict[str, Any], ...]) -> str:
    level = "low"
    for op in operations:
        kind = op.get("op")
        if kind in ("drop_table", "drop_column", "delete") or (kind == "update" and not op.get("where")):
            return "high"
        if kind in ("update", "rename_column", "alter_column_type"):
            level = "medium"
    return level


def schema_hash(tables: Mapping[str, list[Column]]) -> str:
    """SHA-256 of a canonical JSON form: tables by name, columns in order, compact separators."""
    canonical = [
        {"name": name, "columns": [[c.name, c.type, c.nullable, c.default] for c in tables[name]]}
        for name in sorted(tables)
    ]
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _like(pattern: str) -> re.Pattern[str]:
    parts = []
    for ch in pattern:
        parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def _show(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


_COMPARE = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
