"""Property-based tests: every tool, called with arguments drawn from its own published input
schema and salted with hostile values, on both backends at once, through a real MCP client.

For each call the properties are:

- the answer is a result with structured content, or a tool error ``CODE: sentence`` whose
  code is one of ``lore_mcp.errors.CODES`` and is not ``INTERNAL_ERROR`` (client input must
  never reach the "unexpected" path), and it comes within ``CALL_SECONDS``;
- an error leaves the store exactly as it was (a fingerprint of every lesson, vote, table,
  row, commit and key, and raw row counts, is the same before and after);
- SQLite and Postgres agree: the same call on the same state gives the same outcome (ok or
  the same code), and the same result once ids, times and scores are set aside;
- no secret survives: every text field is sometimes given a generated secret of one of the
  kinds Lore redacts (``tests.support.secrets``: amid prose, split by an invisible character
  or in fullwidth letters), and that secret is then in neither the store nor the answer.

Each example starts from the same seeded state on both backends: lessons in two projects
(one upvoted), two tables with rows of every column type, a commit history, an org with
keys. The embedding model is replaced by hash-based unit vectors (``HashEngine``):
retrieval quality is not the point here, and the real model would cost minutes.

Three kinds of call are made: each tool alone with generated arguments; generated sequences
that create a table and then insert, update, delete, query and revert on it (so plans and
filters meet data of every column type, past the argument checks); mixed sequences of any
tools. ``KNOWN_HOSTILE`` adds the inputs that broke a property before, every run.

Bounded for CI: ``LORE_FUZZ_EXAMPLES`` examples per tool (default 25) with a fixed seed and
no shrinking (about 90 s on two otherwise idle cores). ``benchmarks/fuzz.py`` runs the same tests
longer, with random seeds, shrinking and a failure database.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.strategies import SearchStrategy
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.errors import CODES, INTERNAL_ERROR
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.tools.registry import TOOL_GROUPS
from lore_mcp.transport.server import LoreServer
from stores import open_local_store, open_postgres_store
from stores.engine.lessons import Scope
from stores.engine.plans import schema_hash
from stores.engine.structured import describe_schema
from tests.support.clients import connected
from tests.support.helpers import ERROR_TEXT, vector
from tests.support.schema_strategies import (
    FLOAT_EDGES,
    INT_EDGES,
    JWT,
    NON_FINITE,
    Ref,
    SchemaStrategies,
    base64_cursor,
    hostile_text,
    json_objects,
    json_values,
    long_text,
    objects,
    resolve,
    timestamps,
    ulid_like,
    ulids,
    weighted,
)
from tests.support.secrets import disguised, embedded, seen
from tests.support.stores import empty_postgres

ORG = "local"
ALL_GROUPS = ("lessons", "structured", "history", "admin")
TOOLS = sorted({name for group in ALL_GROUPS for name in TOOL_GROUPS[group]})
EXAMPLES = int(os.environ.get("LORE_FUZZ_EXAMPLES", "25"))
# Generous: an in-memory call takes milliseconds; the issue asks that none can freeze the server.
CALL_SECONDS = float(os.environ.get("LORE_FUZZ_CALL_SECONDS", "10"))
# Set by ``benchmarks/fuzz.py --collect``: failures are written here and the run goes on, so a
# long run lists every distinct failure instead of stopping at the first.
COLLECT = os.environ.get("LORE_FUZZ_COLLECT")
# Set by ``benchmarks/fuzz.py --stats``: every call's outcome is written here, to see how many
# calls get past argument validation and reach the stores.
STATS = os.environ.get("LORE_FUZZ_STATS")
ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
# Results differ between backends in these without anything being wrong.
VOLATILE_KEYS = frozenset(
    {"created_at", "updated_at", "expires_at", "last_used_at", "revoked_at", "score", "key", "prefix"}
)
# Ranking is fused differently per backend (FTS5 and tsvector score words differently),
# so which lessons a recall returns may differ; only the outcome is compared.
OUTCOME_ONLY = frozenset({"recall_lessons"})


def fuzz_settings() -> settings:
    """CI: a fixed seed and no failure database, so a run is reproducible, and no shrinking.

    Every example runs on two backends from a freshly seeded state, so shrinking a failure
    can take Hypothesis many minutes; CI reports the failing example as found (the report
    names the call, its arguments and both answers). ``benchmarks/fuzz.py`` sets
    ``LORE_FUZZ_RANDOM=1`` for fresh examples each run, remembered under ``.hypothesis/``,
    and ``LORE_FUZZ_SHRINK=1`` to shrink what it finds to a minimal example.
    """
    randomized = os.environ.get("LORE_FUZZ_RANDOM") == "1"
    shrink = os.environ.get("LORE_FUZZ_SHRINK") == "1"
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not randomized,
        database=DirectoryBasedExampleDatabase(".hypothesis/examples") if randomized else None,
        phases=[*phases, Phase.shrink, Phase.explain] if shrink else phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=randomized,
    )


# --- an embedder without the model -------------------------------------------------------------


class HashEngine:
    """The default model's shape (384-d unit vectors), from a hash of the text, at once.

    Text the real tokenizer cannot take (a lone surrogate) fails here too: ``vector``
    encodes it as strict UTF-8, as the model's tokenizer refuses it with a TypeError.
    """

    runtime = "hash"
    dimension = 384
    fingerprint = "lore-tests/hash-384"

    def load(self) -> None:
        """Nothing to load."""

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        return np.stack([vector(text) for text in texts])


def hash_embedder() -> Embedder:
    """An ``Embedder`` on ``HashEngine``, loaded."""
    embedder = Embedder("hash", engine=HashEngine())
    embedder.wait()
    return embedder


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
SECRET_PROJECTS = ["sk-" + "proj-abc123def456ghi789jkl012", "ghp_" + "Zx9Kq2Lm4Nv6Bc8Dw1Ef3Gh5Jk7Mn0Pq2Rs4Tv"]
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


def counts() -> SearchStrategy[int]:
    """Vote counts: what an export holds, and numbers past what a 32- or 64-bit column holds."""
    return weighted(
        (4, st.integers(0, 1000)),
        (1, st.sampled_from([v for v in INT_EDGES if v >= 0])),
        (1, st.sampled_from(INT_EDGES)),
    )


HINTS: dict[str, SearchStrategy[Any]] = {
    "project": project_names(),
    "id": lesson_ids(),
    "commit_id": mostly(st.builds(Ref, st.just("commit"), st.integers(-6, 6)), ulid_like()),
    "cursor": st.one_of(
        st.builds(Ref, st.just("lesson"), st.integers(-4, 4)),
        ulid_like(),
        st.sampled_from(
            ["0", "-1", "1", "²", "١٢", "\U0001d7cf", "999999999999", "9999999999999", "1\n", " 1"]
        ),
        base64_cursor(),
    ),
    "target": st.one_of(lesson_ids(), table_names()),
    "table": mostly(st.sampled_from([SEED_TABLE, SEED_TABLE, "kv"]), table_names()),
    "column": mostly(st.sampled_from([*SEED_COLUMNS, "id"]), column_names()),
    "from": mostly(st.sampled_from(list(SEED_COLUMNS)), column_names()),
    "to": mostly(fresh_names(), column_names()),
    "name": mostly(fresh_names(), st.one_of(column_names(), hostile_text(100))),
    "tags": tag_lists(),
    "plan": plans(),
    "baseSchemaHash": base_hashes(),
    "where": some(row_filter(SEED_COLUMNS), 2),
    "order_by": order_specs(SEED_COLUMNS),
    "rows": some(rows_for(SEED_COLUMNS), 3),
    "set": rows_for(SEED_COLUMNS),
    "value": st.one_of(like_patterns(), json_values()),
    "default": st.one_of(*(values_of(t) for t in TYPES)),
    "created_at": timestamps(),
    "updated_at": timestamps(),
    "expires_at": timestamps(),
    "upvotes": counts(),
    "downvotes": counts(),
    "meta": st.one_of(json_objects(), st.dictionaries(secret_texts(), secret_texts(), max_size=2)),
    "problem": texts(),
    "resolution": texts(),
    "query": texts(),
    "context": st.one_of(hostile_text(), long_text(16_000), secret_texts()),
    "message": st.one_of(hostile_text(), long_text(2000), secret_texts()),
}


def lessons_in() -> SearchStrategy[dict[str, Any]]:
    """A lesson as ``export_lessons`` gives it, with edge values in its fields: what an import
    from another server, or an edited export file, could hold."""
    moment = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1)).map(
        lambda d: d.isoformat() + "Z"
    )
    when = weighted((3, moment), (1, timestamps()))
    meta = weighted(
        (
            3,
            st.dictionaries(
                st.sampled_from(["source_url", "merged_count", "k"]), json_values(big=False), max_size=3
            ),
        ),
        (1, json_objects()),
    )
    return objects(
        {"id": weighted((3, ulids()), (1, lesson_ids())), "problem": texts(), "resolution": texts()},
        {
            "context": st.one_of(hostile_text(), secret_texts()),
            "tags": tag_lists(),
            "confidence": st.sampled_from([0.0, 0.5, 1.0, 5e-324, 0.9999999999999999]),
            "source": st.one_of(hostile_text(), secret_texts()),
            "project": project_names(),
            "upvotes": counts(),
            "downvotes": counts(),
            "created_at": when,
            "updated_at": when,
            "expires_at": when,
            "meta": meta,
        },
    )


LESSON_CURSORS = weighted(
    (2, st.builds(Ref, st.just("lesson"), st.integers(-4, 4))), (1, ulid_like()), (1, hostile_text(64))
)

# Where a property name means something else in one tool.
TOOL_HINTS: dict[str, dict[str, SearchStrategy[Any]]] = {
    "revoke_key": {"id": mostly(st.builds(Ref, st.just("key"), st.integers(0, 2)), lesson_ids())},
    "create_key": {
        "name": mostly(
            st.sampled_from(["ci bot", "laptop", "ü agent"]), st.one_of(hostile_text(101), secret_texts())
        )
    },
    # A cursor that is not one the server handed out is refused, so mostly leave it out.
    "query_rows": {"cursor": weighted((3, st.none()), (1, base64_cursor()))},
    "history": {
        "cursor": weighted(
            (
                3,
                st.sampled_from(
                    ["0", "-1", "1", "3", "²", "١٢", "\U0001d7cf", "9" * 12, "9" * 13, "1\n", " 1"]
                ),
            ),
            (1, hostile_text(20)),
        )
    },
    "list_lessons": {"cursor": LESSON_CURSORS},
    "export_lessons": {"cursor": LESSON_CURSORS},
    "import_lessons": {
        "lessons": weighted((5, st.lists(lessons_in(), min_size=1, max_size=2)), (1, st.just([])))
    },
}


def arguments_for(tool: str, schema: dict[str, Any]) -> SearchStrategy[dict[str, Any]]:
    """Arguments for one tool: two in three within its schema (reaching the stores, with hostile
    content that fits), one in three stepping outside it.

    Made once per tool and schema: Hypothesis validates a strategy the first time it draws
    from it, and a tree this size costs tens of milliseconds to validate in every example.
    """
    key = (tool, json.dumps(schema, sort_keys=True))
    if key not in _ARGUMENTS:
        hints = {**HINTS, **TOOL_HINTS.get(tool, {})}
        strict = SchemaStrategies(schema, loose=False, hints=hints).arguments()
        loose = SchemaStrategies(schema, loose=True, hints=hints).arguments()
        _ARGUMENTS[key] = weighted((2, strict), (1, loose))
    return _ARGUMENTS[key]


_ARGUMENTS: dict[tuple[str, str], SearchStrategy[dict[str, Any]]] = {}


# --- one backend: a server on a seeded store, and a fingerprint of everything it holds ----------


@dataclass(frozen=True)
class Complaint:
    """A broken property: ``signature`` names its kind (tool, backend, code, cause), so a long
    run can count distinct failures; ``text`` says what happened."""

    signature: str
    text: str


@dataclass
class Outcome:
    """What one call came back with."""

    kind: str  # "ok" or the error code
    text: str
    result: Any
    seconds: float
    logged: list[str] = field(default_factory=list)


@dataclass
class Side:
    """One backend under test: its store, a server on it, and what the seed left there."""

    name: str
    open: Callable[[], Any]
    raw_counts: Callable[[], tuple[int, ...]]
    store: Any = None
    server: LoreServer | None = None
    seeded: Any = None
    current: Any = None
    known: dict[str, Any] = field(default_factory=dict)

    def rebuild(self) -> None:
        """A fresh, empty store with a server of every tool group on it."""
        self.store = self.open()
        service = LessonService(self.store, hash_embedder(), default_project="default")
        keys = KeyService(self.store.keys)
        keys.init_org(ORG)
        self.server = build_server(service, keys=keys, tools=ALL_GROUPS)

    def fingerprint(self) -> Any:
        """Everything a client could observe, as one comparable value, and what refs resolve to."""
        store = self.store
        with store.transaction(Scope(org=ORG, project="default"), write=False) as tx:
            projects = sorted({*tx.org_projects(), *PROJECTS})
        lessons, commits, tables, hashes = [], [], [], {}
        for project in projects:
            scope = Scope(org=ORG, project=project)
            cursor = None
            while True:
                page = store.list(scope, (), 100, cursor)
                lessons += [_lesson_print(project, lesson) for lesson in page.lessons]
                cursor = page.next_cursor
                if cursor is None:
                    break
            with store.transaction(scope, write=False) as tx:
                described = describe_schema(tx)
                hashes[project] = described["schema_hash"]
                for name, table in sorted(tx.tables().items()):
                    rows = json.dumps(tx.rows(name), sort_keys=True, default=str)
                    tables.append((project, name, table.next_id, repr(table.columns), rows))
                commits += [(project, c.seq, c.id, c.kind) for c in reversed(tx.commits(None, 1000, None))]
        keys = [(k.id, k.name, k.project, k.root, k.revoked_at) for k in store.keys.list_keys(ORG)]
        self.known = {
            "lesson": sorted(lesson[1] for lesson in lessons),
            "commit": [c[2] for c in commits],
            "key": [k[0] for k in keys],
            "schema_hash": hashes,
        }
        return (tuple(lessons), tuple(commits), tuple(tables), tuple(keys), self.raw_counts())

    def lookup(self, project: Any) -> Callable[[Ref], Any]:
        """How refs of a call on ``project`` resolve on this backend."""

        def resolve_ref(ref: Ref) -> Any:
            if ref.kind == "schema_hash":
                wanted = project if isinstance(project, str) else "default"
                return self.known["schema_hash"].get(wanted, schema_hash({})) + ref.suffix
            found = self.known[ref.kind]
            value = found[ref.index % len(found)] if found else "01ARZ3NDEKTSV4RRFFQ69G5FAV"
            return value + ref.suffix

        return resolve_ref


def _lesson_print(project: str, lesson: Any) -> tuple[Any, ...]:
    return (
        project,
        lesson.id,
        lesson.problem,
        lesson.resolution,
        lesson.context,
        lesson.tags,
        lesson.confidence,
        lesson.source,
        lesson.upvotes,
        lesson.downvotes,
        lesson.updated_at,
        lesson.expires_at,
        json.dumps(lesson.meta, sort_keys=True, default=str),
    )


async def seed(client: Client) -> None:
    """The state every example starts from, made through the tools themselves."""
    saved = [await _ok(client, "save_lesson", lesson) for lesson in SEED_LESSONS]
    await _ok(
        client, "save_lesson", {**SEED_LESSONS[0], "problem": "Kafka consumer lags", "project": "alpha"}
    )
    await _ok(client, "upvote_lesson", {"id": saved[0]["id"]})
    columns = [{"name": n, "type": t} for n, t in SEED_COLUMNS.items()]
    kv = [{"name": "k", "type": "text", "nullable": False, "default": ""}, {"name": "v", "type": "json"}]
    base = (await _ok(client, "schema", {}))["schema_hash"]
    operations = [
        {"op": "create_table", "table": SEED_TABLE, "columns": columns},
        {"op": "insert", "table": SEED_TABLE, "rows": SEED_ROWS},
        {"op": "create_table", "table": "kv", "columns": kv},
        {"op": "insert", "table": "kv", "rows": [{"k": "a", "v": 1}, {"k": "b", "v": "1"}]},
    ]
    await _ok(
        client, "apply", {"plan": {"baseSchemaHash": base, "message": "seed", "operations": operations}}
    )
    await _ok(client, "create_key", {"name": "alpha agent", "project": "alpha"})


async def _ok(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"seeding failed at {tool}: {result.content[0].text}"
    return result.structured_content


# --- running calls on both backends and checking the properties ---------------------------------


class LogCapture(logging.Handler):
    """What the server logged at ERROR while a call ran: the cause of an INTERNAL_ERROR."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        cause = record.exc_info[1] if record.exc_info else None
        detail = f" {type(cause).__name__}: {str(cause)[:300]}" if cause else ""
        self.lines.append(f"{record.getMessage()}{detail}")


@contextlib.contextmanager
def captured_errors() -> Iterator[LogCapture]:
    handler = LogCapture()
    logger = logging.getLogger("lore_mcp")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def call_once(client: Client, tool: str, arguments: dict[str, Any]) -> Outcome:
    """Call a tool and classify the answer; anything but a result or a coded error is a failure."""
    start = time.monotonic()
    with captured_errors() as log:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as exc:  # the client itself could not make sense of the answer
            return Outcome(
                "CLIENT_RAISED", f"{type(exc).__name__}: {exc}", None, time.monotonic() - start, log.lines
            )
    seconds = time.monotonic() - start
    if not result.is_error:
        kind = "ok" if result.structured_content is not None else "NO_STRUCTURED_CONTENT"
        return Outcome(kind, "", result.structured_content, seconds, log.lines)
    text = result.content[0].text if result.content else ""
    match = ERROR_TEXT.match(text)
    kind = match["code"] if match and match["code"] in CODES else "UNCODED"
    return Outcome(kind, text, None, seconds, log.lines)


def comparable(value: Any) -> Any:
    """A result with what legitimately differs between backends set aside."""
    if isinstance(value, dict):
        return {k: "<varies>" if k in VOLATILE_KEYS else comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, str) and ULID.fullmatch(value):
        return "<ulid>"
    if isinstance(value, float) and math.isnan(value):
        return "<nan>"
    return value


def first_difference(a: Any, b: Any, where: str = "result") -> tuple[str | None, Any, Any]:
    """Where two results first differ (None when they agree), and the two values there.
    ``-0.0`` and ``0.0`` differ here, though Python's ``==`` says they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            found = first_difference(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{where}.{key}")
            if found[0] is not None:
                return found
        return None, a, b
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where} (length)", len(a), len(b)
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{where}[{index}]")
            if found[0] is not None:
                return found
        return None, a, b
    same = type(a) is type(b) and (a == b or repr(a) == repr(b))
    if same and isinstance(a, float):
        same = math.copysign(1, a) == math.copysign(1, b)
    return (None if same else where), a, b


def problems_with(tool: str, side: str, outcome: Outcome) -> list[Complaint]:
    """What is wrong with one answer on its own."""
    found = []
    if outcome.kind == INTERNAL_ERROR or outcome.kind not in ("ok", *CODES):
        cause = outcome.logged[0].split(" ", 2)[2].split(":")[0] if outcome.logged else ""
        found.append(
            Complaint(
                f"{tool} {side} {outcome.kind} {cause}",
                f"{side}: answered {outcome.kind}: {outcome.text[:300]}",
            )
        )
    if "Traceback" in outcome.text:
        found.append(Complaint(f"{tool} {side} traceback", f"{side}: the error text carries a traceback"))
    if outcome.seconds > CALL_SECONDS:
        found.append(
            Complaint(f"{tool} {side} slow", f"{side}: took {outcome.seconds:.1f} s (limit {CALL_SECONDS} s)")
        )
    if outcome.logged and outcome.kind != INTERNAL_ERROR:
        found.append(Complaint(f"{tool} {side} logged", f"{side}: logged at ERROR: {outcome.logged}"))
    return found


def leaks(tool: str, side: str, needles: set[str], state: Any, outcome: Outcome) -> list[Complaint]:
    """A planted secret found in the store or the answer, as given or once folded (NFKC,
    invisible characters removed: what a reader would make of a disguised one)."""
    if not needles:
        return []
    text = json.dumps([state, outcome.result, outcome.text], default=str, ensure_ascii=False).lower()
    folded = seen(text).lower()
    return [
        Complaint(f"{tool} {side} secret kept", f"{side}: a planted secret was kept: {needle!r}")
        for needle in sorted(needles)
        if needle.lower() in text or seen(needle).lower() in folded
    ]


def shown(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


@dataclass
class Pair:
    """The same calls on SQLite and on Postgres, side by side."""

    sides: list[Side]
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    counting: bool = True  # off while warming up, so ``--stats`` counts only the tests' calls

    def __repr__(self) -> str:
        return f"Pair({', '.join(side.name for side in self.sides)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis prints the fixture with a failing example; the whole state would be
        tens of kB, which it warns about (an error under ``filterwarnings = error``)."""
        printer.text(repr(self))

    def run(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """Run ``calls`` in order from the seeded state; raise AssertionError at the first call
        that breaks a property, naming the call, its arguments and every backend's answer."""
        asyncio.run(self._run(calls))

    async def _fresh(self, side: Side) -> None:
        if side.current is not None and side.current == side.seeded:
            return
        if side.store is not None:
            side.store.close()
        side.rebuild()
        async with connected(side.server) as client:
            await seed(client)
        side.seeded = side.current = side.fingerprint()

    async def _run(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        for side in self.sides:
            await self._fresh(side)
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(connected(side.server)) for side in self.sides]
            for step, (tool, raw) in enumerate(calls):
                outcomes: list[Outcome] = []
                complaints: list[Complaint] = []
                for side, client in zip(self.sides, clients, strict=True):
                    before = side.current
                    arguments = resolve(raw, side.lookup(raw.get("project")))
                    outcome = await call_once(client, tool, arguments)
                    outcomes.append(outcome)
                    complaints += problems_with(tool, side.name, outcome)
                    try:
                        side.current = side.fingerprint()
                    except Exception as exc:  # what the call stored cannot be read back
                        side.current = None  # the next example starts from a new store
                        complaints.append(
                            Complaint(
                                f"{tool} {side.name} store unreadable {type(exc).__name__}",
                                f"{side.name}: after this call the store cannot be read back "
                                f"({type(exc).__name__}: {str(exc)[:200]})",
                            )
                        )
                        continue
                    complaints += leaks(tool, side.name, planted_in(raw), side.current, outcome)
                    if outcome.kind != "ok" and side.current != before:
                        complaints.append(
                            Complaint(
                                f"{tool} {side.name} {outcome.kind} changed the store",
                                f"{side.name}: the {outcome.kind} changed the store",
                            )
                        )
                complaints += self._disagreements(tool, outcomes)
                if STATS and self.counting:
                    record_outcome(tool, outcomes[0])
                if complaints:
                    report = self._report(step, tool, raw, outcomes, complaints)
                    if COLLECT and self.counting:  # fuzz.py --collect: record it, go on to the next example
                        record_failure(tool, raw, complaints, report)
                        return
                    raise AssertionError(report)

    def _disagreements(self, tool: str, outcomes: list[Outcome]) -> list[Complaint]:
        kinds = [o.kind for o in outcomes]
        names = [side.name for side in self.sides]
        if len(set(kinds)) > 1:
            says = ", ".join(f"{name} {kind}" for name, kind in zip(names, kinds, strict=True))
            return [Complaint(f"{tool} disagree {says}", f"the backends disagree: {says}")]
        if tool in OUTCOME_ONLY or kinds[0] != "ok":
            return []
        results = [comparable(o.result) for o in outcomes]
        found = []
        for name, other in zip(names[1:], results[1:], strict=True):
            where, mine, theirs = first_difference(results[0], other)
            if where is not None:
                found.append(
                    Complaint(
                        f"{tool} differ {re.sub(r'[0-9]+', 'N', where)}",
                        f"the backends give different results at {where}: {names[0]} {shown(mine, 200)}, "
                        f"{name} {shown(theirs, 200)}",
                    )
                )
        return found

    def _report(
        self, step: int, tool: str, raw: dict[str, Any], outcomes: list[Outcome], complaints: list[Complaint]
    ) -> str:
        lines = [f"call {step}: {tool}({shown(raw)})", *(c.text for c in complaints)]
        for side, outcome in zip(self.sides, outcomes, strict=True):
            answer = outcome.text if outcome.kind != "ok" else shown(outcome.result, 1500)
            lines.append(f"  {side.name} -> {outcome.kind} in {outcome.seconds:.2f} s: {answer[:1500]}")
            lines += [f"    logged: {line}" for line in outcome.logged]
        return "\n".join(lines)


def record_failure(tool: str, raw: dict[str, Any], complaints: list[Complaint], report: str) -> None:
    """Append one failure to the ``LORE_FUZZ_COLLECT`` file (JSON Lines) for ``benchmarks/fuzz.py``."""
    line = {
        "tool": tool,
        "signatures": [c.signature for c in complaints],
        "size": len(repr(raw)),
        "report": report,
    }
    with open(COLLECT, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def record_outcome(tool: str, outcome: Outcome) -> None:
    """Append how one call ended (on the first backend) to the ``LORE_FUZZ_STATS`` file."""
    message = outcome.text.split(": ", 1)[1] if ": " in outcome.text else outcome.text
    line = {"tool": tool, "kind": outcome.kind, "message": message[:60]}
    with open(STATS, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _sqlite_counts(path: Path) -> Callable[[], tuple[int, ...]]:
    def counts() -> tuple[int, ...]:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in RAW_TABLES)

    return counts


def _postgres_counts(url: str) -> Callable[[], tuple[int, ...]]:
    import psycopg

    def counts() -> tuple[int, ...]:
        with psycopg.connect(url, autocommit=True) as conn:
            return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in RAW_TABLES)

    return counts


# Every lesson (expired ones too, which listings leave out), row, table, commit and key.
RAW_TABLES = ("lessons", "mem_tables", "mem_rows", "commits", "api_keys", "orgs")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Pair]:
    """A local and a Postgres backend, each with a server of every tool group."""
    folder = tmp_path_factory.mktemp("fuzz")
    generation = iter(range(1_000_000))

    def open_local() -> Any:
        path = folder / f"lore-{next(generation)}.db"
        local.raw_counts = _sqlite_counts(path)
        return open_local_store(path)

    def open_postgres() -> Any:
        empty_postgres(postgres_url)
        return open_postgres_store(postgres_url)

    local = Side("local", open_local, lambda: ())
    postgres = Side("postgres", open_postgres, _postgres_counts(postgres_url))
    both = Pair([local, postgres])
    asyncio.run(_list_schemas(both))
    _warm_up(both)
    yield both
    for side in both.sides:
        if side.store is not None:
            side.store.close()


async def _list_schemas(pair: Pair) -> None:
    side = pair.sides[0]
    side.rebuild()
    async with connected(side.server) as client:
        pair.schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    side.store.close()
    side.store = None


def _warm_up(pair: Pair) -> None:
    """Run every tool once on both backends before Hypothesis starts.

    Hypothesis mixes constants found in loaded modules into what it generates; modules
    first imported during an example (the Postgres driver's, error paths') would change
    that pool between runs of the same example, which Hypothesis reports as flaky.
    """
    sample = {
        "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "commit_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "table": SEED_TABLE,
    }
    sample |= {"query": "redis", "problem": "p", "resolution": "r", "name": "warm", "lessons": [], "plan": {}}
    pair.counting = False
    for tool in TOOLS:
        arguments = {k: v for k, v in sample.items() if k in pair.schemas[tool].get("properties", {})}
        with contextlib.suppress(AssertionError):
            pair.run([(tool, arguments)])
    pair.counting = True


# --- the tests -----------------------------------------------------------------------------------


def test_every_listed_tool_is_fuzzed(pair: Pair) -> None:
    """A tool added later is covered without anyone writing a strategy for it."""
    assert sorted(pair.schemas) == TOOLS
    for name, schema in pair.schemas.items():
        # Every keyword of every listed schema is understood (the translator raises otherwise),
        # and strict arguments carry every required property.
        once = settings(database=None, phases=[Phase.generate], max_examples=1)
        drawn = find(SchemaStrategies(schema).arguments(), lambda args: True, settings=once)
        assert set(schema.get("required", ())) <= set(drawn), name


@pytest.mark.parametrize("tool", TOOLS)
@fuzz_settings()
@given(data=st.data())
def test_any_arguments_get_a_result_or_a_coded_error_that_changes_nothing_on_both_backends(
    pair: Pair, tool: str, data: st.DataObject
) -> None:
    arguments = data.draw(arguments_for(tool, pair.schemas[tool]), label=f"{tool} arguments")
    pair.run([(tool, arguments)])


@fuzz_settings()
@given(data=st.data())
def test_tables_made_and_worked_on_by_generated_plans_keep_both_backends_in_step(
    pair: Pair, data: st.DataObject
) -> None:
    pair.run(data.draw(structured_scenario(), label="calls"))


@fuzz_settings()
@given(data=st.data())
def test_mixed_call_sequences_keep_both_backends_in_step(pair: Pair, data: st.DataObject) -> None:
    any_call = st.sampled_from(TOOLS).flatmap(
        lambda tool: arguments_for(tool, pair.schemas[tool]).map(lambda args: (tool, args))
    )
    pair.run(data.draw(st.lists(any_call, min_size=2, max_size=6), label="calls"))


def _plan(*operations: dict[str, Any], message: str = "edge") -> dict[str, Any]:
    return {
        "plan": {"baseSchemaHash": Ref("schema_hash"), "message": message, "operations": list(operations)}
    }


def _import(**fields: Any) -> dict[str, Any]:
    return {"lessons": [{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "problem": "p", "resolution": "r", **fields}]}


# Inputs that broke a property once, each a call sequence from the seeded state. Random
# examples find a class of input only now and then; these keep each class in every CI run.
KNOWN_HOSTILE: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "nul in lesson text": [("save_lesson", {"problem": "a\x00b", "resolution": "r"})],
    "nul in an update": [("update_lesson", {"id": Ref("lesson"), "context": "a\x00b"})],
    "nul in a tag filter": [("recall_lessons", {"query": "redis", "tags": ["a\x00b"]})],
    "nul in a plan message": [("apply", _plan({"op": "drop_table", "table": "kv"}, message="\x00"))],
    "nul in an export cursor": [("export_lessons", {"cursor": "a\x00"})],
    "an export cursor no server gave": [("export_lessons", {"cursor": "zzz"})],
    "a lone surrogate in a row": [
        ("apply", _plan({"op": "insert", "table": "notes", "rows": [{"t": "\ud800"}]}))
    ],
    "a superscript digit as history cursor": [("history", {"cursor": "\u00b2"})],
    "a deeply nested query cursor": [
        (
            "query_rows",
            {"table": "notes", "cursor": base64.urlsafe_b64encode(b"[" * 1400 + b"]" * 1400).decode()},
        )
    ],
    "a trailing newline in a project": [
        ("save_lesson", {"problem": "p", "resolution": "r", "project": "alpha\n"})
    ],
    "a trailing newline in a table name": [("query_rows", {"table": "notes\n"})],
    "a trailing newline in a lesson id": [("get_lesson", {"id": Ref("lesson", suffix="\n")})],
    "a json column of numbers and text, ordered": [
        ("query_rows", {"table": "kv", "order_by": [{"column": "v"}]})
    ],
    "timestamps at the ends of the range with offsets": [
        ("apply", _plan({"op": "insert", "table": "notes", "rows": [{"ts": "0001-01-01T00:00:00+01:00"}]})),
        ("apply", _plan({"op": "insert", "table": "notes", "rows": [{"ts": "9999-12-31T23:30:00-01:00"}]})),
        (
            "query_rows",
            {"table": "notes", "where": [{"column": "ts", "op": "<", "value": "0001-01-01T00:00:00+01:00"}]},
        ),
    ],
    "an import dated before the year 1000": [
        ("import_lessons", _import(created_at="0930-01-01T00:00:00Z")),
        ("list_lessons", {}),
    ],
    "an import dated at the end of the range": [
        ("import_lessons", _import(expires_at="9999-12-31T23:30:00-01:00"))
    ],
    "import vote counts past 64 bits": [("import_lessons", _import(upvotes=2**63, downvotes=2**64))],
    "text past 64 bits converted to integer": [
        (
            "apply",
            _plan(
                {"op": "create_table", "table": "big", "columns": [{"name": "s", "type": "text"}]},
                {"op": "insert", "table": "big", "rows": [{"s": "99999999999999999999"}]},
                {"op": "alter_column_type", "table": "big", "column": "s", "type": "integer"},
            ),
        ),
        ("query_rows", {"table": "big", "where": [{"column": "s", "op": ">", "value": 1}]}),
    ],
    "a negative zero confidence": [("update_lesson", {"id": Ref("lesson"), "confidence": -0.0})],
    "reals and json numbers read back": [
        (
            "apply",
            _plan({"op": "insert", "table": "kv", "rows": [{"k": "f", "v": 1e16}, {"k": "g", "v": -0.0}]}),
        ),
        ("query_rows", {"table": "kv"}),
        ("query_rows", {"table": "notes"}),
    ],
    "reverting a commit that made two tables": [("revert_commit", {"commit_id": Ref("commit", -1)})],
    "a like pattern that backtracks": [
        (
            "query_rows",
            {"table": "notes", "where": [{"column": "t", "op": "like", "value": "%a%a%a%a%a%a%a%b"}]},
        ),
        (
            "apply",
            _plan(
                {
                    "op": "delete",
                    "table": "notes",
                    "where": [{"column": "t", "op": "like", "value": "%a" * 12 + "%b"}],
                }
            ),
        ),
    ],
}


# Issue 21's shapes, planted by hand: each text's needle must not be stored or answered.
_KEY = "sk-" + "aB3dE5fG7hJ9kL1mN2pQ" + "T3BlbkFJ" + "r4StU6vW8xY0zA2bC4dE"
_ISSUE_21 = {
    "google": ("AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "SyD-9tSrke72PouQMnMX"),
    "stripe": ("stripe sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    "assignment": ("PASSWORD=Hunter2xyz in .env", "Hunter2xyz"),
    "zero width": (f"key {_KEY[:9]}\u200b{_KEY[9:]}", _KEY[9:]),
    "fullwidth": ("".join(chr(ord(c) + 0xFEE0) for c in _KEY), _KEY),
}
PLANTED.update(_ISSUE_21.values())
_T = {name: text for name, (text, _) in _ISSUE_21.items()}
KNOWN_HOSTILE |= {
    "issue 21 secrets in every lesson field": [
        (
            "save_lesson",
            {
                "problem": _T["google"],
                "resolution": _T["zero width"],
                "context": _T["assignment"],
                "source": _T["stripe"],
                "tags": [_T["fullwidth"][:64], _T["google"]],
            },
        ),
        ("update_lesson", {"id": Ref("lesson"), "context": _T["fullwidth"], "tags": [_T["assignment"]]}),
    ],
    "issue 21 secrets in a plan": [
        (
            "apply",
            _plan(
                {
                    "op": "insert",
                    "table": "kv",
                    "rows": [{"k": _T["stripe"], "v": {_T["google"]: [_T["zero width"]]}}],
                },
                message=_T["assignment"],
            ),
        ),
        ("query_rows", {"table": "kv"}),
    ],
    "issue 21 secrets in an import": [
        ("import_lessons", _import(context=_T["fullwidth"], meta={_T["google"]: _T["stripe"]}))
    ],
    "a secret as a project name": [
        (
            "save_lesson",
            {"problem": "p", "resolution": "r", "project": SECRET_PROJECTS[0]},
        )
    ],
    "a secret as a key name": [("create_key", {"name": _T["assignment"]})],
}


@pytest.mark.parametrize("name", sorted(KNOWN_HOSTILE))
def test_known_hostile_inputs_get_a_result_or_a_coded_error_that_changes_nothing_on_both_backends(
    pair: Pair, name: str
) -> None:
    pair.run(KNOWN_HOSTILE[name])
