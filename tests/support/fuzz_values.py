"""Hypothesis strategies for the values Lore finds meaningful beyond its schemas: projects, tables,
columns, filters, plans, planted secrets (for ``tests/stores/properties``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from tests.support.schema_strategies import (
    FLOAT_EDGES,
    INT_EDGES,
    JWT,
    NON_FINITE,
    Ref,
    base64_cursor,
    hostile_text,
    json_values,
    long_text,
    timestamps,
    ulid_like,
    weighted,
)
from tests.support.secrets import GITHUB_TOKEN, disguised, embedded

# --- what Lore will find meaningful, beyond what its schemas say --------------------------------

SEED_TABLE = "notes"
SEED_COLUMNS = {"t": "text", "n": "integer", "r": "real", "b": "boolean", "j": "json", "ts": "timestamp"}
SEED_ROWS = [
    {"t": "alpha", "n": 1, "r": 1.5, "b": True, "j": 1, "ts": "2024-01-01T00:00:00Z"},
    {"t": "a" * 40, "n": 2**63 - 1, "r": -0.0, "b": False, "j": "x", "ts": "1970-01-01T00:00:00Z"},
    {"t": "Ünïcødé 😀 100%_done\\", "n": -(2**63) + 1, "r": 1e308, "b": None, "j": {"a": [1, 2]}},
    {"t": None, "n": 0, "r": None, "b": True, "j": [1, "two", None], "ts": "2000-02-29T12:00:00+05:30"},
]
SEED_LESSONS = [
    {
        "problem": "Redis evicts keys early",
        "resolution": "Set maxmemory-policy to allkeys-lru",
        "tags": ["redis"],
    },
    {
        "problem": "Stripe webhook signature fails",
        "resolution": "Use the raw request body",
        "tags": ["stripe"],
    },
    {"problem": "Postgres VACUUM never finishes", "resolution": "Cancel the long idle transaction"},
]
PROJECTS = ["default", "alpha", "beta"]
TYPES = ["text", "integer", "real", "boolean", "json", "timestamp"]
OPS = ["=", "!=", "<", "<=", ">", ">=", "in", "like", "is_null"]


def some(items: SearchStrategy[Any], max_size: int) -> SearchStrategy[list[Any]]:
    """A list of ``items``, empty one time in four (Hypothesis alone draws empty lists most of the
    time, so a filter or an ordering would rarely be there)."""
    return weighted((3, st.lists(items, min_size=1, max_size=max_size)), (1, st.just([])))


def mostly(good: SearchStrategy[Any], other: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """``good`` three times in four: every argument of a call must pass for the call to reach the
    stores, so each one may only be off now and then."""
    return weighted((3, good), (1, other))


def seldom(good: SearchStrategy[Any], other: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """``good`` seven times in eight: for the parts of a filter or ordering, of which a query has
    several, each of which would sink the whole call."""
    return weighted((7, good), (1, other))


# Each planted secret's needle (what must not be stored), by the text that carries it, so
# the property check can tell from a call's arguments which needles it planted.
PLANTED: dict[str, str] = {}


def _plant(kind_needle_text: tuple[str, str, str]) -> str:
    _, needle, text = kind_needle_text
    PLANTED[text] = needle
    return text


def secret_texts() -> SearchStrategy[str]:
    """Prose holding a secret of some kind Lore redacts, plain or disguised (issue 21)."""
    plain = embedded()
    hidden = plain.flatmap(lambda e: disguised(e[2]).map(lambda text: (e[0], e[1], text)))
    return st.one_of(plain, hidden).map(_plant)


def planted_in(value: Any) -> set[str]:
    """The needles of the secrets planted anywhere in ``value`` (keys included)."""
    if isinstance(value, str):
        return {PLANTED[value]} if value in PLANTED else set()
    if isinstance(value, dict):
        return set().union(*(planted_in(k) | planted_in(v) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return set().union(*(planted_in(v) for v in value))
    return set()


# Project names that are secrets: refused, so never stored (issue 21).
SECRET_PROJECTS = ["sk-" + "proj-abc123def456ghi789jkl012", GITHUB_TOKEN]
PLANTED.update((name, name) for name in SECRET_PROJECTS)


def project_names() -> SearchStrategy[str]:
    near = [
        *SECRET_PROJECTS,
        "alpha\n",
        "default\n",
        "Alpha",
        "a" * 64,
        "a" * 65,
        "",
        "-a",
        "al pha",
        "alpha\x00",
        "\uff41\uff4c\uff50\uff48\uff41",
    ]
    return mostly(st.sampled_from(PROJECTS), st.one_of(st.sampled_from(near), hostile_text(64)))


def table_names() -> SearchStrategy[str]:
    listed = [SEED_TABLE, "kv", "fresh", "lessons", "lessons\n", "notes\n", "Notes", "mem_rows"]
    listed += ["sqlite_master", "pg_class", "lore_x", "a" * 63, "a" * 64, "1abc", "_x", "naïve", "select"]
    return st.one_of(st.sampled_from(listed), st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True))


def column_names() -> SearchStrategy[str]:
    listed = [*SEED_COLUMNS, "id", "t\n", "T", "x" * 63, "x" * 64, "naïve", "order", "_x", "1x", "v", "k"]
    return st.one_of(st.sampled_from(listed), st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True))


def values_of(column_type: str) -> SearchStrategy[Any]:
    """Values for a column of this type: mostly of the type (at its edges), sometimes not."""
    typed: dict[str, SearchStrategy[Any]] = {
        "text": st.one_of(hostile_text(), long_text(2000), secret_texts()),
        "integer": st.one_of(st.sampled_from(INT_EDGES), st.integers()),
        "real": st.one_of(st.sampled_from(FLOAT_EDGES), st.floats(), st.sampled_from(NON_FINITE)),
        "boolean": st.booleans(),
        "json": st.one_of(
            json_values(), secret_texts(), st.dictionaries(secret_texts(), secret_texts(), max_size=2)
        ),
        "timestamp": timestamps(),
    }
    return seldom(typed[column_type], st.one_of(st.none(), json_values(big=False)))


def like_patterns() -> SearchStrategy[str]:
    wild = st.lists(st.sampled_from(["%", "a", "_", "b", "\\", "%%"]), min_size=1, max_size=16).map("".join)
    return st.one_of(
        st.sampled_from(["%a%a%a%a%a%a%a%b", "%" * 12 + "b", "%a" * 12 + "%b", "%", "_", "a%", "%\\%%"]),
        wild,
        hostile_text(),
    )


def row_filter(columns: dict[str, str]) -> SearchStrategy[dict[str, Any]]:
    """A filter on one of ``columns`` (or a near miss), with a value suited to its operator."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        name = draw(seldom(st.sampled_from([*columns, "id"]), column_names()))
        op = draw(seldom(st.sampled_from(OPS), hostile_text(10)))
        col_type = columns.get(name, "integer")
        by_op: dict[str, SearchStrategy[Any]] = {
            "like": like_patterns(),
            "in": weighted(
                (4, some(values_of(col_type), 5)),
                (1, st.just(list(range(1001)))),
                (1, values_of(col_type)),
            ),
            "is_null": st.one_of(st.booleans(), json_values(big=False)),
        }
        value = draw(by_op.get(op, values_of(col_type)))
        item = {"column": name, "op": op}
        if draw(seldom(st.just(True), st.just(False))):
            item["value"] = value
        return item

    return build()


def order_specs(columns: dict[str, str]) -> SearchStrategy[list[dict[str, Any]]]:
    spec = st.fixed_dictionaries(
        {"column": seldom(st.sampled_from([*columns, "id"]), column_names())},
        optional={"direction": seldom(st.sampled_from(["asc", "desc"]), hostile_text(5))},
    )
    return some(spec, 2)


def rows_for(columns: dict[str, str]) -> SearchStrategy[dict[str, Any]]:
    """A row (or ``set``) naming at least one of ``columns``, now and then a column that is not there."""
    names = st.lists(st.sampled_from(sorted(columns)), min_size=1, max_size=len(columns), unique=True)
    known = names.flatmap(lambda chosen: st.fixed_dictionaries({c: values_of(columns[c]) for c in chosen}))
    stray = st.dictionaries(column_names(), json_values(big=False), min_size=1, max_size=2)
    return weighted((7, known), (1, st.builds(lambda a, b: {**a, **b}, known, stray)), (1, st.just({})))


def column_specs() -> SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        col_type = draw(st.sampled_from(TYPES))
        spec: dict[str, Any] = {"name": draw(mostly(fresh_names(), column_names())), "type": col_type}
        if draw(st.booleans()):
            spec["nullable"] = draw(st.booleans())
        if draw(st.booleans()):
            spec["default"] = draw(values_of(col_type))
        return spec

    return build()


def base_hashes() -> SearchStrategy[Any]:
    """Mostly the project's real schema hash (resolved at call time), else a stale or bad one."""
    return weighted(
        (6, st.just(Ref("schema_hash"))),
        (1, st.text("0123456789abcdef", min_size=64, max_size=64)),
        (1, st.just(Ref("schema_hash", suffix="\n"))),
        (1, hostile_text(70)),
    )


def operations(table: str, columns: dict[str, str]) -> SearchStrategy[dict[str, Any]]:
    """One plan operation on ``table`` (whose columns are known) or on a near-miss name."""
    tables = mostly(st.just(table), table_names())
    cols = mostly(st.sampled_from(sorted(columns)), column_names())
    where = some(row_filter(columns), 2)
    return st.one_of(
        st.fixed_dictionaries(
            {
                "op": st.just("create_table"),
                "table": mostly(fresh_names(), table_names()),
                "columns": weighted((5, st.lists(column_specs(), min_size=1, max_size=4)), (1, st.just([]))),
            }
        ),
        st.fixed_dictionaries({"op": st.just("insert"), "table": tables, "rows": some(rows_for(columns), 3)}),
        st.fixed_dictionaries(
            {"op": st.just("update"), "table": tables, "where": where, "set": rows_for(columns)}
        ),
        st.fixed_dictionaries({"op": st.just("delete"), "table": tables, "where": where}),
        st.fixed_dictionaries({"op": st.just("add_column"), "table": tables, "column": column_specs()}),
        st.fixed_dictionaries({"op": st.just("drop_column"), "table": tables, "column": cols}),
        st.fixed_dictionaries(
            {"op": st.just("rename_column"), "table": tables, "from": cols, "to": mostly(fresh_names(), cols)}
        ),
        st.fixed_dictionaries(
            {
                "op": st.just("alter_column_type"),
                "table": tables,
                "column": cols,
                "type": st.sampled_from(TYPES),
            }
        ),
        st.fixed_dictionaries({"op": st.just("drop_table"), "table": tables}),
    )


def plans(table: str = SEED_TABLE, columns: dict[str, str] = SEED_COLUMNS) -> SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "baseSchemaHash": base_hashes(),
            "operations": st.lists(operations(table, columns), min_size=1, max_size=2),
        },
        optional={"message": st.one_of(hostile_text(), long_text(2000))},
    )


@st.composite
def structured_scenario(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    """Calls that make a table and then work on it: so rows, filters and orderings meet data
    of the generated types, past the argument checks."""
    table = draw(mostly(fresh_names(), table_names()))
    names = draw(st.lists(mostly(fresh_names(), column_names()), min_size=1, max_size=4, unique=True))
    columns = {n: draw(st.sampled_from(TYPES)) for n in names}
    create = {
        "op": "create_table",
        "table": table,
        "columns": [{"name": n, "type": t} for n, t in columns.items()],
    }
    rows = draw(some(rows_for(columns), 5))
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "apply",
            {
                "plan": {
                    "baseSchemaHash": Ref("schema_hash"),
                    "operations": [create, {"op": "insert", "table": table, "rows": rows}],
                }
            },
        )
    ]
    follow_ups = st.one_of(
        st.fixed_dictionaries(
            {"table": st.just(table), "where": some(row_filter(columns), 2)},
            optional={
                "order_by": order_specs(columns),
                "limit": st.integers(1, 3),
                "cursor": base64_cursor(),
            },
        ).map(lambda args: ("query_rows", args)),
        plans(table, columns).map(lambda p: ("apply", {"plan": p})),
        plans(table, columns).map(lambda p: ("plan", {"plan": p})),
        st.builds(lambda i: ("revert_commit", {"commit_id": Ref("commit", i)}), st.integers(-3, -1)),
        st.just(("history", {"target": table})),
    )
    calls += draw(st.lists(follow_ups, min_size=1, max_size=4))
    return calls


def texts() -> SearchStrategy[str]:
    """Lesson text: a seeded lesson's own (to reach the merge path), hostile or long."""
    seeded = st.sampled_from([lesson[k] for lesson in SEED_LESSONS for k in ("problem", "resolution")])
    return st.one_of(seeded, hostile_text(), long_text(16_000), secret_texts())


def tag_lists() -> SearchStrategy[list[str]]:
    tags = mostly(
        st.sampled_from(["redis", "REDIS", " redis ", "stripe", "AKIA2KGAFRFW0H9NYWT1", JWT[:60], "x" * 64]),
        st.one_of(st.just("x" * 65), hostile_text(64), secret_texts()),
    )
    return some(tags, 3)


def lesson_ids() -> SearchStrategy[Any]:
    """Ids of lessons the seed made (resolved per backend), near misses of them, other ULIDs."""
    refs = st.builds(Ref, st.just("lesson"), st.integers(-4, 4))
    near = st.builds(Ref, st.just("lesson"), st.integers(-4, 4), st.sampled_from(["\n", "x", " "]))
    return mostly(refs, st.one_of(near, ulid_like()))


def fresh_names() -> SearchStrategy[str]:
    """Valid names for new tables and columns, so creating one gets past the name checks."""
    return st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
        lambda n: (
            n not in ("id", "lessons", "commits", "snapshots") and not n.startswith(("pg_", "lore_", "mem_"))
        )
    )
