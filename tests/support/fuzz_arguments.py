"""Arguments for every tool, drawn from its published input schema and salted with the values of
``fuzz_values`` (for ``tests/stores/properties``)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from tests.support.fuzz_values import (
    SEED_COLUMNS,
    SEED_TABLE,
    TYPES,
    base_hashes,
    column_names,
    fresh_names,
    lesson_ids,
    like_patterns,
    mostly,
    order_specs,
    plans,
    project_names,
    row_filter,
    rows_for,
    secret_texts,
    some,
    table_names,
    tag_lists,
    texts,
    values_of,
)
from tests.support.schema_strategies import (
    INT_EDGES,
    Ref,
    SchemaStrategies,
    base64_cursor,
    hostile_text,
    json_objects,
    json_values,
    long_text,
    objects,
    timestamps,
    ulid_like,
    ulids,
    weighted,
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
