"""Numbers in stored JSON read back the same from every backend: ``-0.0`` is written ``0.0`` everywhere
(``numeric`` has none, SQLite ``REAL`` drops the sign, ``double precision`` and JSON text keep it), and
``jsonb_text`` writes exponent floats in full with ``.0`` (``jsonb`` prints ``1e+16`` back as an integer)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any


def plain_float(value: float) -> float:
    """``value`` with ``-0.0`` made ``0.0`` (adding ``0.0`` does exactly that, nothing else)."""
    return value + 0.0


def has_negative_zero(value: Any) -> bool:
    """Whether a JSON-like value holds ``-0.0`` anywhere."""
    return _any_float(value, lambda item: item == 0.0 and math.copysign(1.0, item) < 0)


def _any_float(value: Any, test: Callable[[float], bool]) -> bool:
    """Whether a float anywhere in a JSON-like value passes ``test`` (no recursion: deep values)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if test(item):
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def without_negative_zero(value: Any) -> Any:
    """A JSON-like value with every ``-0.0`` in it made ``0.0``; ``value`` itself when it has none."""
    return _zeroed(value) if has_negative_zero(value) else value


def _zeroed(value: Any) -> Any:
    if isinstance(value, float):
        return plain_float(value)
    if isinstance(value, Mapping):
        return {key: _zeroed(inner) for key, inner in value.items()}
    return [_zeroed(inner) for inner in value] if isinstance(value, list | tuple) else value


def jsonb_text(value: Any) -> str:
    """JSON text for ``jsonb`` whose floats read back as floats (slower only for exponent floats)."""
    text = json.dumps(value)
    # Tried only in the 32 characters before each "e+" (a float's repr takes 24): a bulk import's commit
    # has 256 base64 vectors (640 KB, an "e+" every few thousand characters); at each one it took 12 ms.
    found = (_EXPONENT_NUMBER.search(text, max(0, m.start() - 32), m.end()) for m in _E_PLUS.finditer(text))
    if not any(found):
        return text
    # Written again only when a float itself is one json.dumps gives a positive exponent.
    return _encode(value) if _any_float(value, lambda item: "e+" in float.__repr__(item)) else text


# A number with a positive exponent after start, "[", ":" or ","; base64 vectors never match.
_EXPONENT_NUMBER, _E_PLUS = re.compile(r"(?:^|[\[:,] ?)-?[0-9][0-9.]*e\+"), re.compile(r"e\+")


def _encode(value: Any) -> str:
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, Mapping):
        items = (f"{json.dumps(_key(key))}: {_encode(inner)}" for key, inner in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_encode(inner) for inner in value) + "]"
    return json.dumps(value)


def _key(key: Any) -> str:
    """An object key as ``json.dumps`` writes it (it turns numbers, booleans and null into text)."""
    return key if isinstance(key, str) else str(next(iter(json.loads(json.dumps({key: 0})))))


def _float_text(value: float) -> str:
    """A float as JSON with no exponent, so ``numeric`` gives it back with its fraction digit."""
    text = json.dumps(value)  # a small exponent (1e-07) comes back from jsonb as 0.0000001: a float
    return text if "e+" not in text else format(Decimal(text), "f") + ".0"
