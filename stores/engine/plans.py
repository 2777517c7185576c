"""Structured-memory plans: parsing, identifiers, types, risk and the schema hash, in Python shared
by every backend so a plan means the same everywhere. Agents never send SQL: identifiers meet a
strict pattern and a reserved list, values their column types; filters (``stores.engine.filters``)
are triples evaluated here, with bounded cost."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stores.engine.json_numbers import plain_float, without_negative_zero
from stores.errors import InvalidInputError, StoreError

TYPES = ("text", "integer", "real", "boolean", "json", "timestamp")
FILTER_OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "like", "is_null")
OPERATIONS = tuple(
    "create_table drop_table add_column drop_column rename_column alter_column_type insert update delete".split()
)
# \A and \Z, not ^ and $: ``$`` also matches before a final newline, so "notes\n" would pass.
IDENTIFIER = re.compile(r"\A[a-z][a-z0-9_]{0,62}\Z")
# Names a plan may never use: Lore's own tables and the databases' catalogs.
RESERVED_NAMES = frozenset("id lessons commits snapshots schema_migrations information_schema".split())
RESERVED_PREFIXES = ("sqlite_", "pg_", "lore_", "mem_")
MAX_OPERATIONS = 100
MAX_ROWS_PER_PLAN = 50_000
MAX_COLUMNS = 100
MAX_MESSAGE_CHARS = 2_000
MAX_FILTERS = 50
MAX_IN_VALUES = 1_000
# A like pattern's length bounds the work per value: at most this many steps per character.
MAX_LIKE_CHARS = 200
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # integers are 64-bit, as in SQL databases
MAX_JSON_DEPTH = 100


class PlanError(StoreError):
    """An operation of a plan cannot run; ``index`` is its position in the plan."""

    def __init__(self, index: int | None, error: StoreError) -> None:
        where = f"operation {index}: " if index is not None else ""
        super().__init__(f"{where}{error}")
        self.index, self.error = index, error


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
    _check_text(message, "message")
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
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
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
    """A JSON value checked against a column type; timestamps as UTC ISO-8601, ``-0.0`` as ``0.0``
    (``jsonb`` drops its sign and SQLite JSON text keeps it)."""
    if value is None:
        return None
    if col_type == "timestamp":
        return timestamp(value, column)
    if col_type == "json":
        _check_json(value, column)
        return without_negative_zero(value)
    if not _IS.get(col_type, lambda v: False)(value):
        raise InvalidInputError(f"column {column!r} is {col_type}; {show_value(value)} is not.")
    if col_type == "text":
        _check_text(value, f"column {column!r}")
    elif col_type == "integer":
        _check_int_range(value, column)
    elif col_type == "real":
        value = plain_float(float(value))
    return value


_IS: dict[str, Callable[[Any], bool]] = {
    "text": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "real": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and _finite(v),
    "boolean": lambda v: isinstance(v, bool),
}
_AS_IS = object()  # a conversion's answer for a value ``coerce`` then checks as it is


def convert(value: Any, to_type: str, column: str) -> Any:
    """A stored value converted for alter_column_type, or InvalidInputError naming it."""
    if value is None:
        return None
    try:
        conversion = _CONVERSIONS.get(to_type)
        converted = conversion(value, column) if conversion is not None else _AS_IS
        return coerce(value, to_type, column) if converted is _AS_IS else converted
    except IntegerRangeError:
        raise
    except (ValueError, OverflowError, InvalidInputError):
        raise InvalidInputError(f"column {column!r}: {show_value(value)} cannot become {to_type}.") from None


def _to_integer(value: Any, column: str) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return _check_int_range(int(value), column, shown=value)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
        return _check_int_range(int(value.strip()), column, shown=value)
    return _AS_IS


def _to_real(value: Any, column: str) -> Any:
    if _IS["real"](value) or (isinstance(value, str) and math.isfinite(float(value))):
        return plain_float(float(value))
    return _AS_IS


def _to_boolean(value: Any, column: str) -> Any:
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return _AS_IS


_CONVERSIONS: dict[str, Callable[[Any, str], Any]] = {
    "text": lambda v, c: v if isinstance(v, str) else json.dumps(v),
    "integer": _to_integer,
    "real": _to_real,
    "boolean": _to_boolean,
    "json": lambda v, c: v,
    "timestamp": lambda v, c: timestamp(v, c) if isinstance(v, str) else _AS_IS,
}


def timestamp(value: Any, column: str) -> str:
    """An ISO-8601 time as UTC text that sorts as it reads (``0001-01-01T00:00:00.000000Z``)."""
    try:
        parsed = datetime.fromisoformat(value.strip()) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise InvalidInputError(f"column {column!r} is a timestamp; {show_value(value)} is not ISO-8601.")
    try:
        utc = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError(
            f"column {column!r}: {show_value(value)} is outside the years 0001 to 9999 once "
            "converted to UTC; use a time within that range."
        ) from None
    # isoformat, not strftime: strftime writes the year 999 as "999", not "0999".
    return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def sort_key(value: Any) -> tuple[Any, ...]:
    """A total order on column values, the same on every backend: booleans, numbers, text, canonical JSON."""
    if value is None:
        return (1,)
    for rank, kind in enumerate((bool, int | float, str)):
        if isinstance(value, kind):
            return (0, rank, value)
    return (0, 3, json.dumps(value, sort_keys=True))


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


class IntegerRangeError(InvalidInputError):
    """An integer beyond 64 bits."""


def _check_int_range(value: int, column: str, shown: Any = None) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise IntegerRangeError(
            f"column {column!r}: {show_value(value if shown is None else shown)} is outside the integer range "
            f"({INT_MIN} to {INT_MAX})."
        )
    return value


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _check_text(value: str, what: str) -> None:
    """Text every backend can store: no NUL (Postgres refuses it) and no lone surrogates."""
    if "\x00" in value:
        raise InvalidInputError(f"{what}: text cannot contain the NUL character (U+0000).")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(
                f"{what}: text holds an unpaired surrogate code point, which is not valid Unicode."
            ) from None


def _check_json(value: Any, column: str) -> None:
    """A JSON value both backends store alike: finite numbers, checked text, bounded depth."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list) and depth >= MAX_JSON_DEPTH:
            raise InvalidInputError(
                f"column {column!r}: JSON values may nest at most {MAX_JSON_DEPTH} arrays or objects deep."
            )
        if isinstance(item, str):
            _check_text(item, f"column {column!r}")
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise InvalidInputError(f"column {column!r}: JSON object keys must be text.")
                _check_text(key, f"column {column!r}")
                stack.append((inner, depth + 1))
        elif isinstance(item, list):
            stack.extend((inner, depth + 1) for inner in item)
        else:
            _check_json_scalar(item, column)


def _check_json_scalar(item: Any, column: str) -> None:
    if isinstance(item, float) and not math.isfinite(item):
        raise InvalidInputError(f"column {column!r}: JSON numbers must be finite, not {item}.")
    if isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 1000:
        raise InvalidInputError(f"column {column!r}: a JSON number here has more than 300 digits.")
    if item is not None and not isinstance(item, bool | int | float):
        raise InvalidInputError(f"column {column!r}: {show_value(item)} is not a JSON value.")


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,30}")


def show_value(value: Any) -> str:
    """A value as an error message quotes it: short, and never failing on odd input."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {int(value.bit_length() * math.log10(2)) + 1} digits"
    try:
        text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    except (ValueError, RecursionError):
        text = f"a {type(value).__name__} value"
    return text if len(text) <= 60 else text[:57] + "…"
