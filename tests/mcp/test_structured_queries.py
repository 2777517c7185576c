"""Structured memory through the MCP tools: query_rows, plans and their staleness, isolation between
projects and the worked example of docs/structured-memory.md, on every backend (split from ``test_structured_tools.py``).

The helpers that build plans and call these tools are in ``tests/support/plans.py``; the
``notes`` and ``fruit`` tables are fixtures of ``tests/mcp/conftest.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.support.helpers import ToolFailed, call
from tests.support.plans import (
    LESSON,
    NOTES_COLUMNS,
    NOTES_ROWS,
    all_rows,
    apply_ops,
    codes,
    column,
    cond,
    create_table,
    dry_run,
    ids_of,
    insert,
    make_plan,
    schema_hash,
    state,
    table_of,
)

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=(
        "what queries and plans mean, the same in either era; both eras' structured tools are in "
        "test_structured_tools"
    ),
)

# --- query_rows: filters, order, pages --------------------------------------------------------

FILTERS: list[tuple[list[dict[str, Any]], list[int]]] = [
    ([], [1, 2, 3, 4]),
    ([cond("qty", "=", 5)], [1]),
    ([cond("qty", "!=", 5)], [2, 3, 4]),
    ([cond("qty", "<", 7)], [1, 2]),
    ([cond("qty", "<=", 7)], [1, 2, 4]),
    ([cond("qty", ">", 5)], [3, 4]),
    ([cond("qty", ">=", 5)], [1, 3, 4]),
    ([cond("price", ">", 1.0)], [1, 2, 4]),
    ([cond("price", "<=", 1.5)], [1, 3]),
    ([cond("name", "=", "banana")], [3]),
    ([cond("name", "!=", "banana")], [1, 2, 4]),
    ([cond("name", "<", "b")], [1, 2]),
    ([cond("name", "in", ["apple", "cherry", "kiwi"])], [1, 4]),
    ([cond("qty", "in", [0, 12])], [2, 3]),
    ([cond("name", "like", "ap%")], [1, 2]),
    ([cond("name", "like", "_anana")], [3]),
    ([cond("name", "like", "%rr%")], [4]),
    ([cond("name", "like", "AP%")], [1, 2]),  # LIKE is case-insensitive (docs/structured-memory.md)
    ([cond("note", "!=", "x")], [3]),  # a comparison with null is false (docs/structured-memory.md)
    ([cond("note", "is_null", True)], [2, 4]),
    ([cond("note", "is_null", False)], [1, 3]),
    ([cond("ripe", "=", True)], [1, 3]),
    ([cond("ripe", "=", False)], [2, 4]),
    ([cond("picked", ">=", "2024-03-01T00:00:00+00:00")], [3, 4]),
    ([cond("id", ">", 2)], [3, 4]),
    ([cond("id", "in", [1, 3])], [1, 3]),
    ([cond("name", "like", "a%"), cond("qty", ">", 1)], [1]),
    ([cond("ripe", "=", True), cond("note", "is_null", False), cond("qty", "<", 10)], [1]),
    ([cond("name", "=", "'); DROP TABLE fruit; --")], []),
    ([cond("name", "like", "%' OR '1'='1")], []),
]


async def test_query_rows_applies_every_filter_operator(client: Client, fruit: None) -> None:
    wrong = []
    for where, expected in FILTERS:
        got = await ids_of(client, "fruit", where=where)
        if got != expected:
            wrong.append((where, expected, got))
    assert wrong == []
    assert len(await all_rows(client, "fruit")) == 4  # the table survived the injection attempts


async def test_update_and_delete_use_the_same_filters(client: Client, fruit: None) -> None:
    wrong = []
    for where, expected in FILTERS:
        if not where:
            continue
        result = await call(
            client,
            "plan",
            plan=make_plan(await schema_hash(client), {"op": "delete", "table": "fruit", "where": where}),
        )
        if not result["ok"] or result["effects"]["rows"]["deleted"] != len(expected):
            wrong.append((where, expected, result))
    assert wrong == []
    await apply_ops(
        client,
        {"op": "update", "table": "fruit", "where": [cond("name", "like", "ap%")], "set": {"qty": 100}},
    )
    assert await ids_of(client, "fruit", where=[cond("qty", "=", 100)]) == [1, 2]
    await apply_ops(client, {"op": "delete", "table": "fruit", "where": [cond("note", "is_null", True)]})
    assert await ids_of(client, "fruit") == [1, 3]


ORDERS: list[tuple[list[dict[str, str]], list[int]]] = [
    ([], [1, 2, 3, 4]),
    ([{"column": "price", "direction": "desc"}], [4, 2, 1, 3]),
    ([{"column": "price", "direction": "asc"}], [3, 1, 2, 4]),
    ([{"column": "name", "direction": "desc"}], [4, 3, 2, 1]),
    ([{"column": "qty", "direction": "asc"}], [2, 1, 4, 3]),
    ([{"column": "id", "direction": "desc"}], [4, 3, 2, 1]),
    ([{"column": "picked", "direction": "desc"}], [4, 3, 2, 1]),
    ([{"column": "ripe", "direction": "asc"}, {"column": "qty", "direction": "desc"}], [4, 2, 3, 1]),
]


@pytest.mark.parametrize("page", [1, 3, 50])
async def test_query_rows_orders_and_pages_through_every_row_once(
    client: Client, fruit: None, page: int
) -> None:
    wrong = []
    for order_by, expected in ORDERS:
        got = await ids_of(client, "fruit", order_by=order_by, page=page)
        if got != expected:
            wrong.append((order_by, expected, got))
    paged_filtered = await ids_of(
        client,
        "fruit",
        page=page,
        where=[cond("qty", ">", 0)],
        order_by=[{"column": "price", "direction": "desc"}],
    )
    assert wrong == []
    assert paged_filtered == [4, 1, 3]


async def test_the_last_page_has_no_cursor_and_a_full_page_then_an_empty_one_is_fine(
    client: Client, fruit: None
) -> None:
    first = await call(client, "query_rows", table="fruit", limit=2)
    assert [r["id"] for r in first["rows"]] == [1, 2] and first["next_cursor"]
    second = await call(client, "query_rows", table="fruit", limit=2, cursor=first["next_cursor"])
    assert [r["id"] for r in second["rows"]] == [3, 4]
    if second["next_cursor"] is not None:
        third = await call(client, "query_rows", table="fruit", limit=2, cursor=second["next_cursor"])
        assert third == {"rows": [], "next_cursor": None}
    whole = await call(client, "query_rows", table="fruit")
    assert len(whole["rows"]) == 4 and whole["next_cursor"] is None


async def test_pages_ordered_by_a_column_with_ties_lose_and_repeat_nothing(client: Client) -> None:
    groups = ["b", "a", "b", "a", "b", "a", "b", "c", "a"]
    await apply_ops(client, create_table("t", column("g", "text")), insert("t", *({"g": g} for g in groups)))
    for direction in ("asc", "desc"):
        rows = await all_rows(client, "t", page=2, order_by=[{"column": "g", "direction": direction}])
        assert sorted(r["id"] for r in rows) == list(range(1, len(groups) + 1))
        assert [r["g"] for r in rows] == sorted(groups, reverse=direction == "desc")


async def test_the_longest_name_allowed_is_63_characters(client: Client) -> None:
    name = "a" * 63
    await apply_ops(client, create_table(name, column("b" * 63, "text")), insert(name, {"b" * 63: "x"}))
    assert await all_rows(client, name) == [{"id": 1, "b" * 63: "x"}]


async def test_pages_skip_nothing_when_rows_are_deleted_between_pages(client: Client, fruit: None) -> None:
    """An agent working through a table page by page may delete what it has handled."""
    first = await call(client, "query_rows", table="fruit", limit=2)
    assert [r["id"] for r in first["rows"]] == [1, 2]
    await apply_ops(client, {"op": "delete", "table": "fruit", "where": [cond("id", "in", [1, 2])]})
    rest = await all_rows(client, "fruit", cursor=first["next_cursor"], page=2)
    assert [r["id"] for r in rest] == [3, 4]


async def test_pages_stay_whole_when_rows_are_added_between_pages(client: Client, fruit: None) -> None:
    first = await call(client, "query_rows", table="fruit", limit=2)
    await apply_ops(client, insert("fruit", {"name": "damson", "qty": 1}))
    rest = await all_rows(client, "fruit", cursor=first["next_cursor"], page=2)
    assert [r["id"] for r in first["rows"]] + [r["id"] for r in rest] == [1, 2, 3, 4, 5]


# --- plan: dry runs and risk ------------------------------------------------------------------

RISKS: list[tuple[str, list[dict[str, Any]], str]] = [
    ("create table", [create_table("more", column("x", "text"))], "low"),
    ("add column", [{"op": "add_column", "table": "notes", "column": column("x", "text")}], "low"),
    ("insert", [insert("notes", {"title": "d"})], "low"),
    (
        "all additive",
        [
            create_table("more", column("x", "text")),
            insert("more", {"x": "y"}),
            insert("notes", {"title": "d"}),
        ],
        "low",
    ),
    (
        "update",
        [{"op": "update", "table": "notes", "where": [cond("n", ">", 1)], "set": {"title": "x"}}],
        "medium",
    ),
    ("rename column", [{"op": "rename_column", "table": "notes", "from": "n", "to": "m"}], "medium"),
    ("alter type", [{"op": "alter_column_type", "table": "notes", "column": "n", "type": "real"}], "medium"),
    (
        "insert and update",
        [
            insert("notes", {"title": "d"}),
            {"op": "update", "table": "notes", "where": [cond("id", "=", 1)], "set": {"n": 9}},
        ],
        "medium",
    ),
    ("drop table", [{"op": "drop_table", "table": "notes"}], "high"),
    ("drop column", [{"op": "drop_column", "table": "notes", "column": "n"}], "high"),
    ("delete", [{"op": "delete", "table": "notes", "where": [cond("id", "=", 1)]}], "high"),
    ("update everything", [{"op": "update", "table": "notes", "where": [], "set": {"n": 0}}], "high"),
    ("delete everything", [{"op": "delete", "table": "notes", "where": []}], "high"),
    (
        "additive then drop",
        [insert("notes", {"title": "d"}), {"op": "drop_column", "table": "notes", "column": "due"}],
        "high",
    ),
    (
        "rename then delete",
        [
            {"op": "rename_column", "table": "notes", "from": "n", "to": "m"},
            {"op": "delete", "table": "notes", "where": [cond("m", "=", 1)]},
        ],
        "high",
    ),
]


async def test_plan_rates_risk_and_changes_nothing(client: Client, notes: dict[str, Any]) -> None:
    before = await state(client)
    wrong = []
    for case, operations, risk in RISKS:
        result = await dry_run(client, *operations)
        if not (result["ok"] is True and result["errors"] == [] and result["risk"] == risk):
            wrong.append((case, risk, result))
    assert wrong == []
    assert await state(client) == before


async def test_plan_reports_the_effects_apply_then_has(client: Client, notes: dict[str, Any]) -> None:
    # Each row is touched by one operation only, so per-operation and net counts agree.
    operations = [
        insert("notes", {"title": "d"}, {"title": "e"}),
        {"op": "update", "table": "notes", "where": [cond("id", "in", [1, 2])], "set": {"n": 0}},
        {"op": "delete", "table": "notes", "where": [cond("title", "=", "c")]},
        {"op": "add_column", "table": "notes", "column": column("extra", "text")},
    ]
    planned = await dry_run(client, *operations)
    assert planned["ok"] is True and planned["risk"] == "high"
    assert planned["effects"]["rows"] == {"inserted": 2, "updated": 2, "deleted": 1}
    assert len(planned["effects"]["schema"]) == 1
    applied = await apply_ops(client, *operations)
    assert applied["effects"] == planned["effects"]
    assert [(r["id"], r["title"], r["n"]) for r in await all_rows(client, "notes")] == [
        (1, "a", 0),
        (2, "b", 0),
        (4, "d", None),
        (5, "e", None),
    ]


async def test_plan_names_the_index_and_code_of_each_bad_operation(
    client: Client, notes: dict[str, Any]
) -> None:
    result = await dry_run(
        client,
        insert("notes", {"title": "fine"}),
        insert("nope", {"x": 1}),
        create_table("notes", column("x", "text")),
        insert("notes", {"title": "fine", "n": "not a number"}),
    )
    assert result["ok"] is False
    # The first bad operation is reported; any further ones (a checker may stop at the first)
    # carry their own index and code. The good operation 0 is never blamed.
    assert (result["errors"][0]["index"], result["errors"][0]["code"]) == (1, "NOT_FOUND")
    expected = {1: "NOT_FOUND", 2: "CONFLICT", 3: "VALIDATION_ERROR"}
    assert all(expected.get(e["index"]) == e["code"] for e in result["errors"]), result["errors"]
    assert all(isinstance(e["message"], str) and e["message"] for e in result["errors"])


# --- stale plans ------------------------------------------------------------------------------


async def test_a_plan_on_an_unknown_base_hash_is_stale(client: Client, notes: dict[str, Any]) -> None:
    before = await state(client)
    stale = make_plan("0" * 64, insert("notes", {"title": "d"}))
    result = await call(client, "plan", plan=stale)
    assert result["ok"] is False
    assert "STALE_PLAN" in codes(result)
    with pytest.raises(ToolFailed) as err:
        await call(client, "apply", plan=stale)
    assert err.value.code == "STALE_PLAN"
    assert notes["schema_hash"] in err.value.message
    assert await state(client) == before


async def test_a_plan_made_before_another_schema_change_is_refused_as_stale(
    client: Client, notes: dict[str, Any]
) -> None:
    old_base = await schema_hash(client)
    newer = await apply_ops(client, {"op": "add_column", "table": "notes", "column": column("x", "text")})
    before = await state(client)
    plan = make_plan(old_base, {"op": "drop_column", "table": "notes", "column": "n"})
    assert "STALE_PLAN" in codes(await call(client, "plan", plan=plan))
    with pytest.raises(ToolFailed) as err:
        await call(client, "apply", plan=plan)
    assert err.value.code == "STALE_PLAN"
    assert newer["schema_hash"] in err.value.message
    assert re.search(r"\b[0-9a-f]{64}\b", err.value.message)
    assert await state(client) == before


async def test_inserting_rows_does_not_make_other_plans_stale(client: Client, notes: dict[str, Any]) -> None:
    base = await schema_hash(client)
    await call(client, "apply", plan=make_plan(base, insert("notes", {"title": "d"})))
    await call(client, "apply", plan=make_plan(base, insert("notes", {"title": "e"})))
    assert await ids_of(client, "notes") == [1, 2, 3, 4, 5]


async def test_two_schema_changes_on_the_same_base_at_once_let_exactly_one_win(
    client: Client, notes: dict[str, Any]
) -> None:
    base = await schema_hash(client)
    plans = [
        make_plan(base, {"op": "add_column", "table": "notes", "column": column(f"c{i}", "text")})
        for i in range(4)
    ]
    results = await asyncio.gather(
        *(client.call_tool("apply", {"plan": p}) for p in plans), return_exceptions=True
    )
    assert not any(isinstance(r, BaseException) for r in results), results
    won = [r for r in results if not r.is_error]
    lost = [r for r in results if r.is_error]
    assert len(won) == 1
    assert all(r.content[0].text.startswith("STALE_PLAN: ") for r in lost)
    columns = [c["name"] for c in table_of(await call(client, "schema"), "notes")["columns"]]
    assert len([c for c in columns if c.startswith("c")]) == 1


async def test_concurrent_inserts_all_land_with_distinct_ids_and_sequence_numbers(
    client: Client, notes: dict[str, Any]
) -> None:
    base = await schema_hash(client)
    results = await asyncio.gather(
        *(
            call(
                client,
                "apply",
                plan=make_plan(base, insert("notes", *({"title": f"w{i}"} for _ in range(5)))),
            )
            for i in range(6)
        )
    )
    assert sorted(r["seq"] for r in results) == list(range(notes["seq"] + 1, notes["seq"] + 7))
    assert await ids_of(client, "notes") == list(range(1, 3 + 30 + 1))


# --- isolation --------------------------------------------------------------------------------


async def test_a_projects_tables_rows_and_commits_are_invisible_to_every_other_project(
    client: Client,
) -> None:
    empty = await schema_hash(client, "b")
    a = await apply_ops(
        client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS), project="a"
    )
    schema_b = await call(client, "schema", project="b")
    assert schema_b == {"tables": [], "schema_hash": empty}
    with pytest.raises(ToolFailed) as err:
        await call(client, "query_rows", table="notes", project="b")
    assert err.value.code == "NOT_FOUND"
    assert (await call(client, "history", project="b"))["commits"] == []
    assert (await call(client, "history", target="notes", project="b"))["commits"] == []
    with pytest.raises(ToolFailed) as err:
        await call(client, "get_commit", commit_id=a["commit_id"], project="b")
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(ToolFailed) as err:
        await call(client, "revert_commit", commit_id=a["commit_id"], project="b")
    assert err.value.code == "NOT_FOUND"
    # Writing to A's table from B finds nothing, and A's hash is stale in B.
    with pytest.raises(ToolFailed) as err:
        await call(client, "apply", plan=make_plan(empty, insert("notes", {"title": "x"})), project="b")
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(ToolFailed) as err:
        await call(
            client, "apply", plan=make_plan(a["schema_hash"], insert("notes", {"title": "x"})), project="b"
        )
    assert err.value.code == "STALE_PLAN"
    # B builds its own table of the same name; ids, rows and sequence numbers are its own.
    b = await apply_ops(
        client, create_table("notes", *NOTES_COLUMNS), insert("notes", {"title": "b only"}), project="b"
    )
    assert b["seq"] == 1
    assert b["schema_hash"] == a["schema_hash"]
    assert [r["title"] for r in await all_rows(client, "notes", project="b")] == ["b only"]
    assert [r["title"] for r in await all_rows(client, "notes", project="a")] == ["a", "b", "c"]
    await apply_ops(client, {"op": "drop_table", "table": "notes"}, project="b")
    assert [r["title"] for r in await all_rows(client, "notes", project="a")] == ["a", "b", "c"]
    assert table_of(await call(client, "schema", project="a"), "notes")["row_count"] == 3


async def test_structured_writes_leave_lessons_alone_and_lessons_stay_out_of_tables(client: Client) -> None:
    saved = await call(client, "save_lesson", **LESSON)
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    schema = await call(client, "schema")
    assert [t["name"] for t in schema["tables"]] == ["notes"]
    await apply_ops(client, {"op": "drop_table", "table": "notes"})
    got = await call(client, "recall_lessons", query="redis eviction policy")
    assert [x["id"] for x in got["lessons"]] == [saved["id"]]


# --- the worked example of docs/structured-memory.md ----------------------------------------


async def test_the_documented_flow_schema_plan_apply_history_revert_runs(client: Client) -> None:
    base = (await call(client, "schema"))["schema_hash"]
    plan = make_plan(
        base,
        create_table(
            "decisions",
            column("topic", "text", nullable=False),
            column("choice", "text", nullable=False),
            column("decided_at", "timestamp"),
        ),
        insert("decisions", {"topic": "queue", "choice": "sqs", "decided_at": "2024-05-01T09:30:00Z"}),
        message="Track architecture decisions",
    )
    checked = await call(client, "plan", plan=plan)
    assert checked["ok"] is True and checked["risk"] == "low" and checked["errors"] == []
    applied = await call(client, "apply", plan=plan)
    history = await call(client, "history")
    assert history["commits"][0]["id"] == applied["commit_id"]
    assert history["commits"][0]["kind"] == "apply"
    assert history["commits"][0]["message"] == "Track architecture decisions"
    rows = await all_rows(client, "decisions")
    assert [(r["topic"], r["choice"]) for r in rows] == [("queue", "sqs")]
    reverted = await call(client, "revert_commit", commit_id=applied["commit_id"])
    assert reverted["reverted"] == applied["commit_id"]
    assert reverted["schema_hash"] == base
    assert (await call(client, "schema"))["tables"] == []
    assert (await call(client, "history"))["commits"][0]["kind"] == "revert"


STRUCTURED_PAGE = Path(__file__).resolve().parents[2] / "docs" / "structured-memory.md"


def worked_example_calls() -> list[dict[str, Any]]:
    """The JSON tool calls of the worked example in docs/structured-memory.md, in order."""
    text = STRUCTURED_PAGE.read_text(encoding="utf-8")
    section = text[text.index("## A worked example") :]
    end = section.find("\n## ")  # the example's own section: up to the next one, if any
    section = section if end == -1 else section[:end]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.DOTALL)]


async def test_the_docs_worked_example_runs_as_written(client: Client) -> None:
    calls = worked_example_calls()
    assert [c["tool"] for c in calls] == [
        "schema",
        "plan",
        "apply",
        "apply",
        "query_rows",
        "history",
        "revert_commit",
    ]
    schema_call, plan_call, create_call, update_call, query_call, history_call, revert_call = calls

    schema = await call(client, "schema", **schema_call["arguments"])
    assert schema["tables"] == []
    assert (
        schema_call["arguments"] == {}
        and plan_call["arguments"]["plan"]["baseSchemaHash"] == schema["schema_hash"]
    )

    planned = await call(client, "plan", **plan_call["arguments"])
    assert planned["ok"] is True and planned["risk"] == "low"
    assert planned["effects"]["rows"]["inserted"] == 2

    created = await call(client, "apply", **create_call["arguments"])
    assert created["seq"] == 1
    # The example's next plan was written against the hash this apply returns, on any backend.
    assert update_call["arguments"]["plan"]["baseSchemaHash"] == created["schema_hash"]
    assert (await call(client, "plan", **update_call["arguments"]))["risk"] == "medium"
    updated = await call(client, "apply", **update_call["arguments"])
    assert updated["seq"] == 2

    open_tasks = await call(client, "query_rows", **query_call["arguments"])
    assert [r["title"] for r in open_tasks["rows"]] == ["Tag the release"]
    commits = (await call(client, "history", **history_call["arguments"]))["commits"]
    assert [c["id"] for c in commits] == [updated["commit_id"], created["commit_id"]]

    with pytest.raises(ToolFailed) as err:
        await call(client, "revert_commit", commit_id=created["commit_id"])
    assert err.value.code == "CONFLICT" and f"#{updated['seq']} apply" in err.value.message

    assert revert_call["arguments"]["commit_id"].startswith("<")  # a placeholder for the update's id
    reverted = await call(
        client, "revert_commit", **{**revert_call["arguments"], "commit_id": updated["commit_id"]}
    )
    assert reverted["reverted"] == updated["commit_id"]
    assert reverted["schema_hash"] == created["schema_hash"]
    rows = await all_rows(client, "tasks")
    assert [(r["title"], r["done"]) for r in rows] == [
        ("Write the changelog", False),
        ("Tag the release", False),
    ]
    assert (await call(client, "history"))["commits"][0]["kind"] == "revert"


def canonical_hash(tables: dict[str, list[tuple[str, str, bool, Any]]]) -> str:
    """The canonical form ``stores.engine.plans.schema_hash`` documents, computed independently: a JSON
    list of tables sorted by name, each ``{"name", "columns": [[name, type, nullable, default]]}``
    without the implicit id, keys sorted, compact separators, UTF-8."""
    canonical = [{"name": name, "columns": [list(c) for c in tables[name]]} for name in sorted(tables)]
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def test_the_schema_hash_is_the_sha256_of_the_canonical_form(client: Client) -> None:
    assert await schema_hash(client) == hashlib.sha256(b"[]").hexdigest() == canonical_hash({})
    result = await apply_ops(
        client,
        create_table("zz", column("v", "json")),
        create_table(
            "notes",
            column("title", "text", nullable=False),
            column("n", "integer", default=3),
            column("done", "boolean", nullable=False, default=False),
        ),
    )
    assert result["schema_hash"] == canonical_hash(
        {
            "notes": [
                ("title", "text", False, None),
                ("n", "integer", True, 3),
                ("done", "boolean", False, False),
            ],
            "zz": [("v", "json", True, None)],
        }
    )
