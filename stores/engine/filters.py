"""Row filters in Python with SQL's semantics (null compares false, ``like`` ignores case): backends agree."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from stores import deadline
from stores.engine.plans import (
    FILTER_OPS,
    MAX_FILTERS,
    MAX_IN_VALUES,
    MAX_LIKE_CHARS,
    Column,
    coerce,
    show_value,
)
from stores.errors import InvalidInputError


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: Any


def filters(raw: Any, columns: Mapping[str, Column]) -> list[Filter]:
    """Row filters checked against the table's columns (``id`` included)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidInputError("where must be a list of {column, op, value} filters.")
    if len(raw) > MAX_FILTERS:
        raise InvalidInputError(f"where may hold at most {MAX_FILTERS} filters.")
    return [_filter(item, columns) for item in raw]


def _filter(item: Any, columns: Mapping[str, Column]) -> Filter:
    if not isinstance(item, Mapping):
        raise InvalidInputError("each filter must be an object with column, op and value.")
    name = item.get("column")
    if not isinstance(name, str) or name not in columns:
        raise InvalidInputError(f"filter column {show_value(name)} is not a column of this table.")
    op = item.get("op")
    if op not in FILTER_OPS:
        raise InvalidInputError(f"filter op {show_value(op)} is not one of {' '.join(FILTER_OPS)}.")
    return Filter(column=name, op=op, value=_filter_value(op, item.get("value"), columns[name]))


def _filter_value(op: str, value: Any, col: Column) -> Any:
    if op == "is_null":
        if not isinstance(value, bool):
            raise InvalidInputError("is_null takes true or false as its value.")
    elif op == "in":
        if not isinstance(value, list) or len(value) > MAX_IN_VALUES:
            raise InvalidInputError(f"in takes a list of at most {MAX_IN_VALUES} values.")
        value = [coerce(v, col.type, col.name) for v in value]
    elif op == "like":
        if not isinstance(value, str):
            raise InvalidInputError("like takes a text pattern with % and _.")
        if len(value) > MAX_LIKE_CHARS:
            raise InvalidInputError(
                f"like patterns may be at most {MAX_LIKE_CHARS} characters long; "
                "shorten the pattern or use = or in."
            )
    else:
        if value is None:
            raise InvalidInputError(f"{op} null matches nothing; use is_null.")
        value = coerce(value, col.type, col.name)
    return value


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
            deadline.check()  # the one filter whose cost grows with the value's length
            ok = like(str(value), f.value)
        else:
            try:
                ok = _COMPARE[f.op](value, f.value)
            except TypeError:  # json values of different kinds do not order
                ok = False
        if not ok:
            return False
    return True


def like(value: str, pattern: str) -> bool:
    """SQL ``LIKE`` ignoring case, no escape character; O(len(value) * len(pattern)) at worst."""
    return _LikeMatcher.of(pattern).matches(value)


class _LikeMatcher:
    """A like pattern's ``%``-cut pieces, matched leftmost first in one pass (a ``.*`` regex: exponential)."""

    def __init__(self, pattern: str) -> None:
        pieces = pattern.split("%")
        self.exact = len(pieces) == 1
        compiled = [_piece(p) for p in pieces]
        self.first, self.last = compiled[0], compiled[-1]
        self.first_len, self.last_len = len(pieces[0]), len(pieces[-1])
        self.middle = [(c, len(p)) for c, p in zip(compiled[1:-1], pieces[1:-1], strict=True) if p]

    @staticmethod
    @lru_cache(maxsize=256)
    def of(pattern: str) -> _LikeMatcher:
        return _LikeMatcher(pattern)

    def matches(self, value: str) -> bool:
        if self.exact:
            return self.first.fullmatch(value) is not None
        end = len(value) - self.last_len
        if end < self.first_len or self.first.match(value) is None or self.last.match(value, end) is None:
            return False
        pos = self.first_len
        for piece, size in self.middle:
            found = piece.search(value, pos, end)
            if found is None:
                return False
            pos = found.start() + size
        return True


def _piece(text: str) -> re.Pattern[str]:
    """A fixed-length piece of a like pattern as a regular expression without repetition."""
    parts = ("." if ch == "_" else re.escape(ch) for ch in text)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


_ORDER = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = dict(zip(FILTER_OPS[:6], _ORDER, strict=True))
