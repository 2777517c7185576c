"""Hypothesis strategies drawn from a tool's published JSON Schema, mixed with hostile values.

The property tests (``tests/stores/properties``) call every tool with arguments made
from the input schema the server lists, so a tool or a field added later is exercised
without anyone writing a strategy for it. Only the subset of JSON Schema that pydantic
emits for Lore's tools (after ``lore_mcp.transport.server.lean_schema``) is understood: ``type``
(one or a list), ``properties``/``required``/``additionalProperties``, ``items``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum`` and their
exclusive forms, ``enum``, ``const``, ``anyOf``/``oneOf``, ``$ref`` into ``$defs`` and
``format: date-time``. Anything else raises, so a new keyword is noticed, not ignored.

Two modes: *strict* values satisfy the schema (hostile content that fits: NUL, lone
surrogates, a trailing newline, metacharacters, numbers at the schema's edges), so they
get past argument validation and reach the stores; *loose* values also step just outside
it (one character too long, one past the maximum, the wrong type, a missing required
field), which must come back as ``VALIDATION_ERROR``. ``hints`` add field-aware values by
property name (real-looking project names, ULIDs, the current schema hash) since a
schema alone says nothing about what a server will find meaningful.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

# -- values that reach state the test harness owns ----------------------------------------


@dataclass(frozen=True)
class Ref:
    """A placeholder for something that only exists once a server has run: the ``index``-th
    lesson, commit or key it holds, or its current schema hash. Resolved per backend just
    before the call, so one generated call means the same thing on SQLite and Postgres
    although the ids differ. ``suffix`` is appended to the resolved text ("\\n" makes a
    real id that should no longer match)."""

    kind: str
    index: int = 0
    suffix: str = ""

    def __repr__(self) -> str:
        tail = f"+{self.suffix!r}" if self.suffix else ""
        return f"Ref({self.kind}[{self.index}]{tail})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis prints dataclasses field by field unless told otherwise."""
        printer.text(repr(self))


def resolve(value: Any, lookup: Callable[[Ref], Any]) -> Any:
    """``value`` with every ``Ref`` inside it replaced by ``lookup(ref)``."""
    if isinstance(value, Ref):
        return lookup(value)
    if isinstance(value, dict):
        return {resolve(k, lookup): resolve(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, lookup) for v in value]
    return value


# -- hostile building blocks ----------------------------------------------------------------

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
JWT = (
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
HOSTILE_TEXT = (
    "",
    " ",
    "\t",
    "\n",
    "\r\n",
    "alpha\n",
    "\x00",
    "a\x00b",
    "\ud800",
    "a\udfffb",
    "\ufeff",
    "\u200b",
    "\u202eevil",
    "e\u0301",
    "İ",
    "ß",
    "ǅ",
    "😀",
    "\U0001d7cf",
    "²",
    "١٢",
    "\uff46\uff55\uff4c\uff4c",
    "'; DROP TABLE lessons; --",
    '" OR 1=1 --',
    "%",
    "_",
    "%%%%%%%%%%",
    "%a%a%a%a%a%a%a%b",
    "\\",
    "\\%",
    "(a+)+$",
    ".*",
    "[",
    "\\d{99999}",
    "$1",
    "{{7*7}}",
    "${jndi:ldap://x}",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "NULL",
    "null",
    "true",
    "0",
    "-0",
    "1e308",
    "NaN",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:30:00-01:00",
    "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "AKIA2KGAFRFW0H9NYWT1",
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "lore_sk_0123456789abcdefghijklmnopqrstuv",
    JWT,
    "Bearer abcdef0123456789abcdef0123456789",
    "postgres://user:hunter2@db.example.com/app",
    "4111 1111 1111 1111",
)

INT_EDGES = (
    0,
    1,
    -1,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    -(2**64),
    10**30,
)
FLOAT_EDGES = (
    0.0,
    -0.0,
    5e-324,
    1e-308,
    0.5,
    1.0,
    0.9999999999999999,
    1.0000000000000002,
    36500.0,
    36500.000001,
    2.0**53,
    1e308,
    -1e308,
    1.7976931348623157e308,
)
# Not JSON, but Python's json module writes and reads them, and the in-memory client passes them.
NON_FINITE = (float("inf"), float("-inf"), float("nan"))

TIMESTAMPS = (  # valid ISO-8601, at and near the ends of the range, with offsets
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:30:00-01:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999+00:00",
    "0001-01-01T00:00:00-23:59",
    "9999-12-31T00:00:00+23:59",
    "1970-01-01T00:00:00Z",
    "2024-02-29T12:00:00+05:30",
    "2024-01-01",
    "0930-01-01T00:00:00Z",
    "0099-12-31T23:59:59+00:00",
)
BAD_TIMESTAMPS = (
    "2023-02-29T00:00:00Z",
    "2024-13-01T00:00:00Z",
    "2024-01-01T00:00:00\n",
    " 2024-01-01T00:00:00Z ",
    "2024-01-01T00:00:00+24:00",
    "10000-01-01T00:00:00Z",
    "not a time",
)


def deep_json(depth: int, kind: str = "list") -> Any:
    """``depth`` levels of nested lists or objects around one scalar."""
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if kind == "list" else {f"k{level}": value}
    return value


WIDE_OBJECT = {f"key{i}": i for i in range(1000)}
WIDE_LIST = list(range(1000))


def weighted(*parts: tuple[int, SearchStrategy[Any]]) -> SearchStrategy[Any]:
    """``one_of`` that keeps the proportions given: ``(3, a), (1, b)`` draws ``a`` three times in four.

    Plain ``one_of`` does not: it flattens nested ``one_of`` into its own branches (so a
    strategy made of many alternatives outweighs a single one), it merges a branch given
    twice, and Hypothesis does not repeat an input it has tried, so a branch with few values
    (a handful of valid project names) is used up after a few examples and from then on the
    branches with endless values (random text) are drawn nearly every time; almost every call
    would then fail argument validation. Each branch here is kept apart and padded with an
    ignored integer, so it is never used up."""
    branches = [
        st.tuples(strategy, st.integers(0, 2**32)).map(lambda pair: pair[0])
        for weight, strategy in parts
        for _ in range(weight)
    ]
    return st.one_of(branches)


def ulids() -> SearchStrategy[str]:
    """Valid ULIDs (Crockford base 32, at most 7ZZZ…)."""
    return st.builds(
        lambda first, rest: first + rest,
        st.sampled_from("01234567"),
        st.text(alphabet=CROCKFORD, min_size=25, max_size=25),
    )


def objects(
    required: Mapping[str, SearchStrategy[Any]], optional: Mapping[str, SearchStrategy[Any]]
) -> SearchStrategy[dict[str, Any]]:
    """Objects with every ``required`` key and each ``optional`` key half the time
    (``fixed_dictionaries``' own optional keys are mostly left out, so a tool with many
    optional fields would rarely get any)."""
    maybe = {key: weighted((1, value), (1, st.just(_ABSENT))) for key, value in optional.items()}
    return st.fixed_dictionaries({**required, **maybe}).map(
        lambda drawn: {k: v for k, v in drawn.items() if v is not _ABSENT}
    )


def ulid_like() -> SearchStrategy[str]:
    """Things that look like ULIDs: valid ones, the edges of the range, and near misses."""
    valid = ulids()
    near = st.sampled_from(
        [
            "00000000000000000000000000",
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
            "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
            "01arz3ndektsv4rrffq69g5fav",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV\n",
            "01ARZ3NDEKTSV4RRFFQ69G5FA",
            "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
            "01ARZ3NDEKTSV4RRFFQ69G5FIL",
            "01ARZ3NDEKTSV4RRFFQ69G5FA\x00",
            "01ARZ3NDEKTSV4RRFFQ69G5FA\ud800",
        ]
    )
    return st.one_of(valid, near, valid.map(lambda u: u + "\n"))


def hostile_text(max_size: int = 200) -> SearchStrategy[str]:
    """Short texts meant to break things: listed ones (lone surrogates among them), arbitrary
    Unicode and the two spliced together."""
    anything = st.text(max_size=min(max_size, 40))
    listed = st.sampled_from(HOSTILE_TEXT)
    spliced = st.builds(lambda a, b, c: a + b + c, listed, anything, listed)
    return st.one_of(listed, anything, spliced)


def long_text(max_size: int) -> SearchStrategy[str]:
    """Texts of up to ``max_size`` characters (the limit itself included): long runs that
    make naive matching slow, and long random text."""
    sizes = sorted({n for n in (max_size, max_size - 1, 60, 200, 1000) if 0 < n <= max_size})
    return st.builds(
        lambda n, unit: (unit * n)[:n],
        st.sampled_from(sizes),
        st.sampled_from(["a", "é", "😀", "a%", "ab\x00", "\n"]),
    )


def timestamps() -> SearchStrategy[str]:
    """ISO-8601 texts at the ends of the range, with offsets, and malformed ones."""
    offsets = st.sampled_from(["", "Z", "+00:00", "+01:00", "-01:00", "+14:00", "-12:00", "+23:59"])
    generated = st.builds(
        lambda moment, off: moment.isoformat() + off,
        st.datetimes(),
        offsets,
    )
    return weighted((2, st.sampled_from(TIMESTAMPS)), (2, generated), (1, st.sampled_from(BAD_TIMESTAMPS)))


def sendable_key(text: str) -> str:
    """An object key the MCP client can send: it serialises keys as strict UTF-8, so a lone
    surrogate in a key fails in the client before anything reaches the server (in values
    it does reach the server, and must be answered there)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def object_keys() -> SearchStrategy[str]:
    listed = st.sampled_from(["", "\x00", "a.b", "$ref", "__proto__", "id", "t", "n", "a" * 200])
    return st.one_of(listed, hostile_text(20).map(sendable_key))


def json_values(*, big: bool = True) -> SearchStrategy[Any]:
    """Any JSON value (and a few that JSON cannot spell), including deep and wide ones."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(INT_EDGES),
        st.integers(),
        st.sampled_from(FLOAT_EDGES),
        st.floats(allow_nan=False, allow_infinity=False),
        hostile_text(),
        st.sampled_from(TIMESTAMPS + BAD_TIMESTAMPS),
    )
    nested = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(object_keys(), inner, max_size=4),
        max_leaves=8,
    )
    if not big:
        return nested
    large = st.one_of(
        st.builds(deep_json, st.sampled_from([50, 64, 100, 150]), st.sampled_from(["list", "object"])),
        st.just(WIDE_OBJECT),
        st.just(WIDE_LIST),
        st.sampled_from(NON_FINITE),
    )
    return st.one_of(nested, large)


def json_objects() -> SearchStrategy[dict[str, Any]]:
    """JSON objects, small, deep or wide (for ``meta``, rows and ``set``)."""
    return st.one_of(
        st.dictionaries(object_keys(), json_values(), max_size=5),
        st.builds(lambda d: {"deep": deep_json(d, "object")}, st.sampled_from([50, 100, 150])),
        st.just(WIDE_OBJECT),
    )


def base64_cursor() -> SearchStrategy[str]:
    """Cursors in the shape ``query_rows`` hands out (URL-safe base64 of a JSON list), holding
    values a server never wrote there: wrong types, deep nesting, NaN."""
    payloads = st.one_of(
        st.lists(json_values(big=False), max_size=3).map(lambda v: json.dumps(v)),
        st.sampled_from(
            [
                "[" * 1400 + "]" * 1400,
                "[NaN, Infinity]",
                '{"a": 1}',
                "[1e999]",
                '"x"',
                "[" + "1," * 1000 + "1]",
            ]
        ),
    )
    encoded = payloads.map(lambda p: base64.urlsafe_b64encode(p.encode()).decode()[:4000])
    return st.one_of(encoded, st.sampled_from(["", "=", "!!!", "AAAA", "e30", "W10=\n"]), hostile_text(60))


# -- the translator -----------------------------------------------------------------------

_UNDERSTOOD = frozenset(
    "type properties required additionalProperties items minItems maxItems minLength maxLength "
    "minimum maximum exclusiveMinimum exclusiveMaximum enum const anyOf oneOf $ref $defs format "
    "default description discriminator title".split()
)
# Arrays are kept short: a long list exercises nothing a short one does not, and costs time.
MAX_ARRAY = 3
_ABSENT = object()  # an optional property left out


@dataclass
class SchemaStrategies:
    """Strategies for the values one JSON schema (and its ``$defs``) describes."""

    root: Mapping[str, Any]
    loose: bool = False
    hints: Mapping[str, SearchStrategy[Any]] | None = None

    def arguments(self) -> SearchStrategy[dict[str, Any]]:
        """Arguments for the tool whose input schema is ``root``."""
        return self.value(self.root)

    def value(self, schema: Mapping[str, Any], name: str | None = None) -> SearchStrategy[Any]:
        """Values for ``schema``; ``name`` is the property it describes, for hints."""
        unknown = set(schema) - _UNDERSTOOD
        if unknown:
            raise NotImplementedError(f"schema keywords not understood: {sorted(unknown)}")
        base = self._base(schema)
        hint = (self.hints or {}).get(name) if name is not None else None
        # Hints twice as often as what the schema alone allows: they are what reaches the stores.
        return weighted((2, hint), (1, base)) if hint is not None else base

    def _base(self, schema: Mapping[str, Any]) -> SearchStrategy[Any]:
        if "$ref" in schema:
            return st.deferred(lambda: self.value(self._follow(schema["$ref"])))
        if "const" in schema:
            return self._maybe_wrong(st.just(schema["const"]), "string")
        if "enum" in schema:
            return self._maybe_wrong(st.sampled_from(schema["enum"]), "string")
        options = schema.get("anyOf") or schema.get("oneOf")
        if options:
            return st.one_of([self.value(option) for option in options])
        kind = schema.get("type")
        if kind is None:
            return json_values()
        if isinstance(kind, list):
            return st.one_of([self._typed({**schema, "type": k}) for k in kind])
        return self._typed(schema)

    def _follow(self, ref: str) -> Mapping[str, Any]:
        prefix = "#/$defs/"
        if not ref.startswith(prefix):
            raise NotImplementedError(f"only local $defs references are understood, not {ref}")
        return self.root["$defs"][ref[len(prefix) :]]

    def _typed(self, schema: Mapping[str, Any]) -> SearchStrategy[Any]:
        kind = schema["type"]
        makers: dict[str, Callable[[Mapping[str, Any]], SearchStrategy[Any]]] = {
            "string": self._string,
            "integer": self._integer,
            "number": self._number,
            "boolean": lambda s: self._maybe_wrong(st.booleans(), "boolean"),
            "null": lambda s: st.none(),
            "array": self._array,
            "object": self._object,
        }
        if kind not in makers:
            raise NotImplementedError(f"type {kind!r} is not understood")
        return makers[kind](schema)

    def _maybe_wrong(self, strategy: SearchStrategy[Any], kind: str) -> SearchStrategy[Any]:
        """In loose mode, sometimes a value of another type instead."""
        if not self.loose:
            return strategy
        wrong = {
            "string": st.one_of(st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2)),
            "boolean": st.sampled_from(["true", 0, 1, None, "yes"]),
            "integer": st.one_of(st.sampled_from(["1", True, None, 1.5]), st.sampled_from(NON_FINITE)),
            "number": st.sampled_from(["0.5", True, None, *NON_FINITE]),
            "array": st.one_of(
                st.text(max_size=5), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
            ),
            "object": st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=2)),
        }[kind]
        return st.one_of(strategy, wrong)

    def _string(self, schema: Mapping[str, Any]) -> SearchStrategy[str]:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength", 20_000)
        sources = [hostile_text(high), st.text(max_size=min(high, 30)), long_text(high)]
        if schema.get("format") == "date-time":
            sources.insert(0, timestamps())
        fitted = st.one_of(sources).map(lambda s: _fit(s, low, high))
        if not self.loose:
            return fitted
        outside = [st.builds(lambda unit: (unit * (high + 1))[: high + 1], st.sampled_from(["a", "😀", " "]))]
        if low > 0:
            outside.append(st.just("a" * (low - 1)))
        return self._maybe_wrong(st.one_of(fitted, *outside), "string")

    def _integer(self, schema: Mapping[str, Any]) -> SearchStrategy[int]:
        low, high = _bounds(schema, integer=True)
        edges = [v for v in INT_EDGES if _within(v, low, high)]
        inside = st.one_of(
            st.integers(min_value=low, max_value=high),
            *([st.sampled_from(edges)] if edges else []),
            *([st.just(low)] if low is not None else []),
            *([st.just(high)] if high is not None else []),
        )
        if not self.loose:
            return inside
        outside = [v for v in (*INT_EDGES, *_steps_out(low, high)) if not _within(v, low, high)]
        return self._maybe_wrong(
            st.one_of(inside, st.sampled_from(outside)) if outside else inside, "integer"
        )

    def _number(self, schema: Mapping[str, Any]) -> SearchStrategy[float]:
        low, high = _bounds(schema, integer=False)
        exclude_min = "exclusiveMinimum" in schema
        exclude_max = "exclusiveMaximum" in schema
        edges = [
            v
            for v in (*FLOAT_EDGES, *INT_EDGES)
            if _within(v, low, high) and not (exclude_min and v == low) and not (exclude_max and v == high)
        ]
        inside = st.one_of(
            st.floats(
                min_value=low,
                max_value=high,
                exclude_min=exclude_min,
                exclude_max=exclude_max,
                allow_nan=False,
                allow_infinity=False,
            ),
            *([st.sampled_from(edges)] if edges else []),
        )
        if not self.loose:
            return inside
        outside = [
            v
            for v in (*FLOAT_EDGES, *INT_EDGES, *NON_FINITE, *_steps_out(low, high, exclude_min, exclude_max))
            if not (v == v and _within(v, low, high))
        ]
        return self._maybe_wrong(st.one_of(inside, st.sampled_from(outside)), "number")

    def _array(self, schema: Mapping[str, Any]) -> SearchStrategy[list[Any]]:
        items = schema.get("items", {})
        low = schema.get("minItems", 0)
        high = schema.get("maxItems")
        top = min(high, max(low, MAX_ARRAY)) if high is not None else max(low, MAX_ARRAY)
        inside = st.lists(self.value(items), min_size=low, max_size=top)
        if not self.loose:
            return inside
        outside = []
        if high is not None:
            outside.append(st.lists(self.value(items), min_size=high + 1, max_size=high + 1))
        if low > 0:
            outside.append(st.just([]))
        return self._maybe_wrong(st.one_of(inside, *outside), "array")

    def _object(self, schema: Mapping[str, Any]) -> SearchStrategy[dict[str, Any]]:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = [p for p in properties if p in schema.get("required", ())]
        optional = [p for p in properties if p not in required]
        extra = schema.get("additionalProperties", True)
        if not properties:
            free = json_objects() if extra is not False else st.just({})
            return free if schema is self.root else self._maybe_wrong(free, "object")
        inside = objects(
            {p: self.value(properties[p], p) for p in required},
            {p: self.value(properties[p], p) for p in optional},
        )
        if not self.loose:
            return inside
        variants = [inside]
        if required:  # one required property missing
            variants.append(
                st.tuples(inside, st.sampled_from(required)).map(
                    lambda pair: {k: v for k, v in pair[0].items() if k != pair[1]}
                )
            )
        variants.append(  # a property nobody declared
            st.tuples(
                inside, st.sampled_from(["unexpected", "__class__", "id\n", ""]), json_values(big=False)
            ).map(lambda t: {**t[0], t[1]: t[2]})
        )
        if schema is self.root:  # a tool's arguments are an object on the wire, whatever is inside
            return st.one_of(variants)
        return self._maybe_wrong(st.one_of(variants), "object")


def _fit(text: str, low: int, high: int) -> str:
    """Cut or pad ``text`` to a length the schema allows."""
    text = text[:high]
    return text + "x" * (low - len(text)) if len(text) < low else text


def _bounds(schema: Mapping[str, Any], *, integer: bool) -> tuple[Any, Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if integer:
        if "exclusiveMinimum" in schema and "minimum" not in schema:
            low = int(low) + 1
        if "exclusiveMaximum" in schema and "maximum" not in schema:
            high = int(high) - 1
    return low, high


def _within(value: float, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def _steps_out(
    low: float | None, high: float | None, exclude_min: bool = False, exclude_max: bool = False
) -> list[float]:
    """Values just outside the bounds (and the excluded bound itself)."""
    out: list[float] = []
    if low is not None:
        out += [low - 1, low - 1e-9] + ([low] if exclude_min else [])
    if high is not None:
        out += [high + 1, high + 1e-9] + ([high] if exclude_max else [])
    return out
