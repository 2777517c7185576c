"""Bad plans, operations, queries and project names through the structured tools: each is refused
with a code that names it and changes nothing, on every backend (split from
``tests/mcp/test_structured_tools.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.support.helpers import call
from tests.support.plans import (
    LESSON,
    NOTES_COLUMNS,
    NOTES_ROWS,
    all_rows,
    apply_fails,
    apply_ops,
    codes,
    column,
    cond,
    create_table,
    ids_of,
    insert,
    make_plan,
    state,
    table_of,
)

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=("plan and query validation, below the protocol; both eras' refusals are in test_tool_errors"),
)

# --- bad input --------------------------------------------------------------------------------

BAD_NAMES = [
    "lessons",
    "commits",
    "sqlite_master",
    "sqlite_x",
    "pg_catalog.x",
    "pg_class",
    "lore_meta",
    "a; drop table x",
    '"x"',
    "x'y",
    "x" * 500,
    "Notes",
    "1abc",
    "_x",
    "",
    "café",
    "a b",
    "a-b",
    "mem_rows",
    "a" * 64,
]
BAD_COLUMN_NAMES = ["id", "ID", "sqlite_x", "pg_x", "lore_x", "a; drop table x", '"x"', "x'y", "x" * 500, ""]

ANY_REFUSAL = {"VALIDATION_ERROR", "NOT_FOUND"}
NOT_NULL_REFUSAL = {"VALIDATION_ERROR", "CONFLICT"}
# The spec says NOT_FOUND for unknown columns in apply but VALIDATION_ERROR for unknown
# filter columns in query_rows; a filter inside update/delete may follow either rule.
FILTER_COLUMN_REFUSAL = {"NOT_FOUND", "VALIDATION_ERROR"}

OK_INSERT = insert("notes", {"title": "would be rolled back"})

# (case, bad operation, accepted codes); each runs as operation 1 after a good insert.
BAD_NAME_OPERATIONS: list[tuple[str, Any, set[str]]] = [
    *(
        (f"create table named {name[:30]!r}", create_table(name, column("x", "text")), {"VALIDATION_ERROR"})
        for name in BAD_NAMES
    ),
    *(
        (f"column named {name[:30]!r}", create_table("fresh", column(name, "text")), {"VALIDATION_ERROR"})
        for name in BAD_COLUMN_NAMES
    ),
    *(
        (
            f"add column named {name[:30]!r}",
            {"op": "add_column", "table": "notes", "column": column(name, "text")},
            {"VALIDATION_ERROR"},
        )
        for name in ("id", "a; drop table x", "x" * 500, "lore_x")
    ),
    (
        "rename to id",
        {"op": "rename_column", "table": "notes", "from": "n", "to": "id"},
        {"VALIDATION_ERROR"},
    ),
    (
        "rename to injection",
        {"op": "rename_column", "table": "notes", "from": "n", "to": "n; drop table notes"},
        {"VALIDATION_ERROR"},
    ),
]
RESERVED_TABLE_OPERATIONS: list[tuple[str, Any, set[str]]] = [
    ("insert into lessons", insert("lessons", {"problem": "p", "resolution": "r"}), ANY_REFUSAL),
    ("insert into sqlite_master", insert("sqlite_master", {"name": "x"}), ANY_REFUSAL),
    ("insert into pg_catalog.x", insert("pg_catalog.pg_class", {"relname": "x"}), ANY_REFUSAL),
    ("drop table lessons", {"op": "drop_table", "table": "lessons"}, ANY_REFUSAL),
    ("drop table commits", {"op": "drop_table", "table": "commits"}, ANY_REFUSAL),
    ("drop table injection", {"op": "drop_table", "table": "notes; drop table lessons"}, ANY_REFUSAL),
    ("delete from lessons", {"op": "delete", "table": "lessons", "where": []}, ANY_REFUSAL),
    (
        "update lessons",
        {"op": "update", "table": "lessons", "where": [], "set": {"problem": "x"}},
        ANY_REFUSAL,
    ),
]
MISSING_THING_OPERATIONS: list[tuple[str, Any, set[str]]] = [
    ("insert into a missing table", insert("nope", {"x": 1}), {"NOT_FOUND"}),
    (
        "update a missing table",
        {"op": "update", "table": "nope", "where": [], "set": {"x": 1}},
        {"NOT_FOUND"},
    ),
    ("delete from a missing table", {"op": "delete", "table": "nope", "where": []}, {"NOT_FOUND"}),
    ("drop a missing table", {"op": "drop_table", "table": "nope"}, {"NOT_FOUND"}),
    (
        "add column to a missing table",
        {"op": "add_column", "table": "nope", "column": column("x", "text")},
        {"NOT_FOUND"},
    ),
    ("insert an unknown column", insert("notes", {"title": "x", "nope": 1}), {"NOT_FOUND"}),
    (
        "update sets an unknown column",
        {"op": "update", "table": "notes", "where": [], "set": {"nope": 1}},
        {"NOT_FOUND"},
    ),
    (
        "update filters on an unknown column",
        {"op": "update", "table": "notes", "where": [cond("nope", "=", 1)], "set": {"n": 1}},
        FILTER_COLUMN_REFUSAL,
    ),
    (
        "delete filters on an unknown column",
        {"op": "delete", "table": "notes", "where": [cond("nope", "=", 1)]},
        FILTER_COLUMN_REFUSAL,
    ),
    ("drop a missing column", {"op": "drop_column", "table": "notes", "column": "nope"}, {"NOT_FOUND"}),
    (
        "rename a missing column",
        {"op": "rename_column", "table": "notes", "from": "nope", "to": "x"},
        {"NOT_FOUND"},
    ),
    (
        "alter a missing column",
        {"op": "alter_column_type", "table": "notes", "column": "nope", "type": "text"},
        {"NOT_FOUND"},
    ),
]
CONFLICTING_OPERATIONS: list[tuple[str, Any, set[str]]] = [
    ("create an existing table", create_table("notes", column("x", "text")), {"CONFLICT"}),
    (
        "add an existing column",
        {"op": "add_column", "table": "notes", "column": column("title", "text")},
        {"CONFLICT"},
    ),
    (
        "rename onto an existing column",
        {"op": "rename_column", "table": "notes", "from": "n", "to": "title"},
        {"CONFLICT"},
    ),
    (
        "duplicate columns in create table",
        create_table("fresh", column("x", "text"), column("x", "integer")),
        {"VALIDATION_ERROR", "CONFLICT"},
    ),
]
MISTYPED_OPERATIONS: list[tuple[str, Any, set[str]]] = [
    ("text into an integer column", insert("notes", {"title": "x", "n": "many"}), {"VALIDATION_ERROR"}),
    ("real into an integer column", insert("notes", {"title": "x", "n": 1.5}), {"VALIDATION_ERROR"}),
    ("number into a text column", insert("notes", {"title": 5}), {"VALIDATION_ERROR"}),
    ("abc into a timestamp column", insert("notes", {"title": "x", "due": "abc"}), {"VALIDATION_ERROR"}),
    (
        "date-ish garbage timestamp",
        insert("notes", {"title": "x", "due": "2024-13-45T99:00:00"}),
        {"VALIDATION_ERROR"},
    ),
    ("text into a boolean column", insert("notes", {"title": "x", "done": "yes"}), {"VALIDATION_ERROR"}),
    (
        "text set into an integer column",
        {"op": "update", "table": "notes", "where": [], "set": {"n": "many"}},
        {"VALIDATION_ERROR"},
    ),
    ("null into a not null column", insert("notes", {"title": None}), {"VALIDATION_ERROR"}),
    ("a not null column left out", insert("notes", {"n": 4}), {"VALIDATION_ERROR"}),
    (
        "null set into a not null column",
        {"op": "update", "table": "notes", "where": [], "set": {"title": None}},
        {"VALIDATION_ERROR"},
    ),
    ("insert giving an id", insert("notes", {"id": 99, "title": "x"}), {"VALIDATION_ERROR"}),
    (
        "update setting an id",
        {"op": "update", "table": "notes", "where": [], "set": {"id": 7}},
        {"VALIDATION_ERROR"},
    ),
    (
        "drop the id column",
        {"op": "drop_column", "table": "notes", "column": "id"},
        {"VALIDATION_ERROR", "CONFLICT"},
    ),
    (
        "rename the id column",
        {"op": "rename_column", "table": "notes", "from": "id", "to": "key"},
        {"VALIDATION_ERROR", "CONFLICT"},
    ),
    (
        "not null column without default on a non-empty table",
        {"op": "add_column", "table": "notes", "column": column("x", "text", nullable=False)},
        NOT_NULL_REFUSAL,
    ),
    (
        "unknown column type",
        {"op": "add_column", "table": "notes", "column": column("x", "varchar")},
        {"VALIDATION_ERROR"},
    ),
    ("unknown column type in create", create_table("fresh", column("x", "blob")), {"VALIDATION_ERROR"}),
    (
        "default of the wrong type",
        {"op": "add_column", "table": "notes", "column": column("x", "integer", default="zero")},
        {"VALIDATION_ERROR"},
    ),
    (
        "alter to an unknown type",
        {"op": "alter_column_type", "table": "notes", "column": "n", "type": "bigint"},
        {"VALIDATION_ERROR"},
    ),
    (
        "alter text values to integer",
        {"op": "alter_column_type", "table": "notes", "column": "title", "type": "integer"},
        {"VALIDATION_ERROR", "CONFLICT"},
    ),
]
MALFORMED_OPERATIONS: list[tuple[str, Any, set[str]]] = [
    (
        "unknown filter operator",
        {"op": "delete", "table": "notes", "where": [cond("n", "~", 1)]},
        {"VALIDATION_ERROR"},
    ),
    (
        "in without a list",
        {"op": "delete", "table": "notes", "where": [cond("n", "in", 1)]},
        {"VALIDATION_ERROR"},
    ),
    (
        "is_null without a boolean",
        {"op": "delete", "table": "notes", "where": [cond("n", "is_null", "yes")]},
        {"VALIDATION_ERROR"},
    ),
    (
        "filter value of the wrong type",
        {"op": "delete", "table": "notes", "where": [cond("n", "=", "one")]},
        {"VALIDATION_ERROR"},
    ),
    ("unknown op", {"op": "truncate", "table": "notes"}, {"VALIDATION_ERROR"}),
    ("op missing", {"table": "notes", "rows": [{"title": "x"}]}, {"VALIDATION_ERROR"}),
    ("table missing", {"op": "insert", "rows": [{"title": "x"}]}, {"VALIDATION_ERROR"}),
    ("rows not a list", {"op": "insert", "table": "notes", "rows": {"title": "x"}}, {"VALIDATION_ERROR"}),
    ("row not an object", {"op": "insert", "table": "notes", "rows": ["x"]}, {"VALIDATION_ERROR"}),
    ("columns missing", {"op": "create_table", "table": "fresh"}, {"VALIDATION_ERROR"}),
    ("where not a list", {"op": "delete", "table": "notes", "where": "id = 1"}, {"VALIDATION_ERROR"}),
    ("operation not an object", "drop table notes", {"VALIDATION_ERROR"}),
]
BAD_OPERATIONS = {
    "bad names": BAD_NAME_OPERATIONS,
    "reserved tables": RESERVED_TABLE_OPERATIONS,
    "missing tables and columns": MISSING_THING_OPERATIONS,
    "conflicts": CONFLICTING_OPERATIONS,
    "type mismatches": MISTYPED_OPERATIONS,
    "malformed operations": MALFORMED_OPERATIONS,
}


async def _seed_bad_input(client: Client) -> str:
    """The notes table plus one lesson, so refusals can be shown to have touched neither."""
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    return (await call(client, "save_lesson", **LESSON))["id"]


async def _lessons_intact(client: Client, lesson_id: str) -> None:
    lesson = await call(client, "get_lesson", id=lesson_id)
    assert lesson["problem"] == LESSON["problem"]
    assert [x["id"] for x in (await call(client, "list_lessons"))["lessons"]] == [lesson_id]


async def refusal_problem(client: Client, before: dict[str, Any], bad: Any, accepted: set[str]) -> str | None:
    """What is wrong with how one bad operation (as operation 1) was refused, if anything."""
    plan = make_plan(before["schema"]["schema_hash"], OK_INSERT, bad)
    planned = await client.call_tool("plan", {"plan": plan})
    problem = _plan_problem(planned, accepted)
    if problem is not None:
        return problem
    if await state(client) != before:
        return "plan() changed something"
    applied = await client.call_tool("apply", {"plan": plan})
    if not applied.is_error:
        return f"apply() succeeded: {applied.structured_content!r:.300}"
    problem = _apply_problem(applied.content[0].text, accepted, names_index=not planned.is_error)
    if problem is not None:
        return problem
    if await state(client) != before:
        return "apply() changed something"
    return None


def _plan_problem(planned: Any, accepted: set[str]) -> str | None:
    """What is wrong with plan()'s answer: operation 1 alone refused, with an accepted code."""
    if planned.is_error:
        # A plan that does not even parse may be refused outright, but only as a validation error.
        if not planned.content[0].text.startswith("VALIDATION_ERROR: ") or "VALIDATION_ERROR" not in accepted:
            return f"plan() failed with {planned.content[0].text[:300]!r}"
        return None
    result = planned.structured_content
    if result["ok"] is not False or [e["index"] for e in result["errors"]] != [1]:
        return f"plan() gave {result!r:.300}"
    if result["errors"][0]["code"] not in accepted:
        return f"plan() gave {result['errors']!r:.300}"
    return None


def _apply_problem(text: str, accepted: set[str], *, names_index: bool) -> str | None:
    """What is wrong with apply()'s error text: an accepted code and a sentence, naming
    operation 1 where plan() could name it."""
    code, _, message = text.partition(": ")
    if code not in accepted:
        return f"apply() failed with {text[:300]!r}"
    if len(text) >= 1000 or "Traceback" in text or 'File "' in text:
        return f"apply() error is not a sentence: {text[:300]!r}"
    if names_index and "operation 1" not in message:
        return f"apply() error does not name operation 1: {text[:300]!r}"
    return None


@pytest.mark.parametrize("group", list(BAD_OPERATIONS))
async def test_bad_operations_are_refused_naming_their_index_and_change_nothing(
    client: Client, group: str
) -> None:
    lesson_id = await _seed_bad_input(client)
    before = await state(client)
    wrong = []
    for case, bad, accepted in BAD_OPERATIONS[group]:
        problem = await refusal_problem(client, before, bad, accepted)
        if problem:
            wrong.append((case, problem))
            if problem.endswith("changed something"):
                break  # what follows would only repeat it
    assert wrong == []
    await _lessons_intact(client, lesson_id)


MALFORMED_PLANS: list[tuple[str, Any]] = [
    ("operations missing", {"baseSchemaHash": "BASE", "message": "m"}),
    ("operations not a list", {"baseSchemaHash": "BASE", "message": "m", "operations": {"op": "insert"}}),
    ("operations a string", {"baseSchemaHash": "BASE", "message": "m", "operations": "drop table notes"}),
    ("plan is a list", [{"op": "drop_table", "table": "notes"}]),
    ("plan is a string", "drop table notes"),
    ("plan is null", None),
]


@pytest.mark.parametrize(("case", "plan"), MALFORMED_PLANS, ids=[c[0] for c in MALFORMED_PLANS])
async def test_a_malformed_plan_is_a_validation_error_and_changes_nothing(
    client: Client, case: str, plan: Any
) -> None:
    lesson_id = await _seed_bad_input(client)
    before = await state(client)
    if isinstance(plan, dict):
        plan = {**plan, "baseSchemaHash": before["schema"]["schema_hash"]}
    planned = await client.call_tool("plan", {"plan": plan})
    if planned.is_error:
        assert planned.content[0].text.startswith("VALIDATION_ERROR: "), planned.content[0].text[:300]
    else:
        assert planned.structured_content["ok"] is False
        assert "VALIDATION_ERROR" in codes(planned.structured_content)
    applied = await client.call_tool("apply", {"plan": plan})
    assert applied.is_error
    assert applied.content[0].text.startswith("VALIDATION_ERROR: "), applied.content[0].text[:300]
    assert await state(client) == before
    await _lessons_intact(client, lesson_id)


async def test_a_later_operation_failing_rolls_back_the_earlier_ones(client: Client) -> None:
    await _seed_bad_input(client)
    before = await state(client)
    err = await apply_fails(
        client,
        create_table("extra", column("x", "integer")),
        insert("extra", *({"x": i} for i in range(50))),
        {"op": "add_column", "table": "notes", "column": column("tag", "text", default="t")},
        {"op": "update", "table": "notes", "where": [], "set": {"title": "changed"}},
        {"op": "delete", "table": "notes", "where": [cond("id", "=", 1)]},
        {"op": "rename_column", "table": "notes", "from": "n", "to": "num"},
        insert("notes", {"title": "x", "num": "not a number"}),
    )
    assert err.code == "VALIDATION_ERROR"
    assert "operation 6" in err.message
    assert await state(client) == before
    # The rolled-back plan left no trace: the same table can be created now.
    await apply_ops(client, create_table("extra", column("x", "integer")), insert("extra", {"x": 1}))
    assert await ids_of(client, "extra") == [1]


async def test_ten_thousand_rows_insert_in_one_plan_and_page_back(client: Client) -> None:
    count = 10_000
    await apply_ops(client, create_table("big", column("n", "integer"), column("label", "text")))
    result = await apply_ops(client, insert("big", *({"n": i, "label": f"row {i}"} for i in range(count))))
    assert result["effects"]["rows"]["inserted"] == count
    assert table_of(await call(client, "schema"), "big")["row_count"] == count
    rows = await all_rows(client, "big", page=500)
    assert [r["id"] for r in rows] == list(range(1, count + 1))
    assert [r["n"] for r in rows] == list(range(count))
    last = await call(
        client,
        "query_rows",
        table="big",
        where=[cond("n", ">=", count - 3)],
        order_by=[{"column": "n", "direction": "desc"}],
    )
    assert [r["label"] for r in last["rows"]] == [f"row {i}" for i in (9999, 9998, 9997)]


BAD_QUERIES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("unknown table", {"table": "nope"}, {"NOT_FOUND"}),
    ("lessons table", {"table": "lessons"}, ANY_REFUSAL),
    ("commits table", {"table": "commits"}, ANY_REFUSAL),
    ("sqlite_master", {"table": "sqlite_master"}, ANY_REFUSAL),
    ("pg_catalog table", {"table": "pg_catalog.pg_class"}, ANY_REFUSAL),
    ("injection in table", {"table": "notes; drop table notes"}, ANY_REFUSAL),
    ("quoted table", {"table": '"notes"'}, ANY_REFUSAL),
    ("500-char table", {"table": "x" * 500}, ANY_REFUSAL),
    ("unknown where column", {"table": "notes", "where": [cond("nope", "=", 1)]}, {"VALIDATION_ERROR"}),
    (
        "injection where column",
        {"table": "notes", "where": [cond("n = 1 OR 1", "=", 1)]},
        {"VALIDATION_ERROR"},
    ),
    (
        "unknown order column",
        {"table": "notes", "order_by": [{"column": "nope", "direction": "asc"}]},
        {"VALIDATION_ERROR"},
    ),
    (
        "injection order column",
        {"table": "notes", "order_by": [{"column": "n; drop table notes", "direction": "asc"}]},
        {"VALIDATION_ERROR"},
    ),
    (
        "bad direction",
        {"table": "notes", "order_by": [{"column": "n", "direction": "sideways"}]},
        {"VALIDATION_ERROR"},
    ),
    ("unknown operator", {"table": "notes", "where": [cond("n", "===", 1)]}, {"VALIDATION_ERROR"}),
    ("in without a list", {"table": "notes", "where": [cond("n", "in", "1,2")]}, {"VALIDATION_ERROR"}),
    (
        "is_null without a boolean",
        {"table": "notes", "where": [cond("n", "is_null", 1.5)]},
        {"VALIDATION_ERROR"},
    ),
    ("limit 0", {"table": "notes", "limit": 0}, {"VALIDATION_ERROR"}),
    ("limit 501", {"table": "notes", "limit": 501}, {"VALIDATION_ERROR"}),
    ("garbage cursor", {"table": "notes", "cursor": "garbage"}, {"VALIDATION_ERROR"}),
    ("where not a list", {"table": "notes", "where": "n = 1"}, {"VALIDATION_ERROR"}),
    ("bad project", {"table": "notes", "project": "../etc"}, {"VALIDATION_ERROR"}),
]


async def test_bad_queries_are_refused_with_a_code_and_change_nothing(client: Client) -> None:
    lesson_id = await _seed_bad_input(client)
    before = await state(client)
    wrong = []
    for case, arguments, accepted in BAD_QUERIES:
        result = await client.call_tool("query_rows", arguments)
        text = result.content[0].text if result.is_error else repr(result.structured_content)[:200]
        if not (result.is_error and text.partition(": ")[0] in accepted and "Traceback" not in text):
            wrong.append((case, text[:200]))
    assert wrong == []
    assert await state(client) == before
    await _lessons_intact(client, lesson_id)


async def test_bad_project_names_are_refused_by_every_structured_tool(client: Client) -> None:
    for tool, arguments in (
        ("schema", {}),
        ("plan", {"plan": make_plan("0" * 64)}),
        ("apply", {"plan": make_plan("0" * 64)}),
        ("history", {}),
    ):
        result = await client.call_tool(tool, {**arguments, "project": "../etc"})
        assert result.is_error and result.content[0].text.startswith("VALIDATION_ERROR: "), tool
