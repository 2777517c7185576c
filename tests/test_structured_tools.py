"""Structured memory through the MCP tools: schema, plan, apply and query_rows, on every backend.

Agents design their own tables with plans (a base schema hash, a message and a list of
operations); ``plan`` is the dry run, ``apply`` the atomic change, ``query_rows`` the read.
The helpers that build plans and call these tools are in ``tests/support/plans.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import open_local_store, open_postgres_store
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.plans import (
    NOTES_COLUMNS,
    NOTES_ROWS,
    all_rows,
    apply_fails,
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
from tests.support.processes import stdio_params

HEX64 = re.compile(r"^[0-9a-f]{64}$")
ID_COLUMN = {"name": "id", "type": "integer", "nullable": False, "default": None}
LESSON = {"problem": "Redis evicts keys early", "resolution": "Set maxmemory-policy to allkeys-lru"}
NEW_TOOLS = {"schema", "plan", "apply", "query_rows", "history", "get_commit", "revert_commit"}


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
async def notes(client: Client) -> AsyncIterator[dict[str, Any]]:
    """A ``notes`` table with three rows in the default project; yields the apply result."""
    yield await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))


FRUIT = [
    {
        "name": "apple",
        "qty": 5,
        "price": 1.5,
        "ripe": True,
        "picked": "2024-01-01T00:00:00+00:00",
        "note": "x",
    },
    {
        "name": "apricot",
        "qty": 0,
        "price": 2.25,
        "ripe": False,
        "picked": "2024-02-01T00:00:00+00:00",
        "note": None,
    },
    {
        "name": "banana",
        "qty": 12,
        "price": 0.5,
        "ripe": True,
        "picked": "2024-03-01T00:00:00+00:00",
        "note": "y",
    },
    {
        "name": "cherry",
        "qty": 7,
        "price": 3.0,
        "ripe": False,
        "picked": "2024-04-01T00:00:00+00:00",
        "note": None,
    },
]


@pytest.fixture
async def fruit(client: Client) -> None:
    await apply_ops(
        client,
        create_table(
            "fruit",
            column("name", "text"),
            column("qty", "integer"),
            column("price", "real"),
            column("ripe", "boolean"),
            column("picked", "timestamp"),
            column("note", "text"),
        ),
        insert("fruit", *FRUIT),
    )


# --- tools and schema -------------------------------------------------------------------------


async def test_the_structured_tools_are_listed_with_schemas_and_hints(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= NEW_TOOLS
    for name in NEW_TOOLS:
        assert tools[name].description and len(tools[name].description) > 20, name
        assert tools[name].output_schema is not None, name
        assert tools[name].annotations is not None, name
    for name in ("schema", "plan", "query_rows", "history", "get_commit"):
        assert tools[name].annotations.read_only_hint is True, name
    for name in ("apply", "revert_commit"):
        assert tools[name].annotations.read_only_hint is False, name
    assert "plan" in tools["apply"].input_schema["required"]
    assert "table" in tools["query_rows"].input_schema["required"]


async def test_an_empty_project_has_no_tables_and_a_fixed_schema_hash(client: Client) -> None:
    first = await call(client, "schema")
    assert first["tables"] == []
    assert HEX64.match(first["schema_hash"])
    assert await schema_hash(client, "another-project") == first["schema_hash"]
    assert await call(client, "schema") == first


async def test_schema_lists_tables_by_name_with_the_id_column_first(client: Client) -> None:
    result = await apply_ops(
        client,
        create_table("zeta", column("label", "text")),
        create_table(
            "alpha",
            column("title", "text", nullable=False),
            column("qty", "integer", default=0),
            column("score", "real"),
            column("flag", "boolean", nullable=False, default=True),
            column("data", "json"),
            column("at", "timestamp"),
        ),
        insert("alpha", {"title": "one"}, {"title": "two"}),
    )
    schema = await call(client, "schema")
    assert [t["name"] for t in schema["tables"]] == ["alpha", "zeta"]
    assert table_of(schema, "alpha")["columns"] == [
        ID_COLUMN,
        {"name": "title", "type": "text", "nullable": False, "default": None},
        {"name": "qty", "type": "integer", "nullable": True, "default": 0},
        {"name": "score", "type": "real", "nullable": True, "default": None},
        {"name": "flag", "type": "boolean", "nullable": False, "default": True},
        {"name": "data", "type": "json", "nullable": True, "default": None},
        {"name": "at", "type": "timestamp", "nullable": True, "default": None},
    ]
    assert table_of(schema, "alpha")["row_count"] == 2
    assert table_of(schema, "zeta") == {
        "name": "zeta",
        "columns": [ID_COLUMN, {"name": "label", "type": "text", "nullable": True, "default": None}],
        "row_count": 0,
    }
    assert HEX64.match(schema["schema_hash"])
    assert result["schema_hash"] == schema["schema_hash"]


async def test_the_same_schema_has_the_same_hash_in_every_project(client: Client) -> None:
    ops = [create_table("t", column("a", "text"), column("b", "integer", nullable=False, default=1))]
    one = await apply_ops(client, *ops, project="one")
    two = await apply_ops(client, *ops, project="two", message="a different message")
    assert one["schema_hash"] == two["schema_hash"]
    assert await schema_hash(client, "one") == await schema_hash(client, "two")
    # Rows are not schema: different rows in the two projects leave the hashes equal.
    await apply_ops(client, insert("t", {"a": "only in one"}), project="one")
    assert await schema_hash(client, "one") == await schema_hash(client, "two")


async def test_different_schemas_have_different_hashes_and_equal_ones_equal(client: Client) -> None:
    empty = await schema_hash(client)
    seen = [empty]
    for op in (
        create_table("t", column("a", "text")),
        {"op": "add_column", "table": "t", "column": column("b", "integer")},
        {"op": "alter_column_type", "table": "t", "column": "b", "type": "real"},
        {"op": "rename_column", "table": "t", "from": "b", "to": "c"},
        {"op": "add_column", "table": "t", "column": column("d", "text", nullable=False, default="x")},
    ):
        result = await apply_ops(client, op)
        assert result["schema_hash"] not in seen, op
        seen.append(result["schema_hash"])
    # Back to an earlier schema: back to its hash.
    await apply_ops(client, {"op": "drop_column", "table": "t", "column": "d"})
    assert await schema_hash(client) == seen[4]
    await apply_ops(client, {"op": "drop_column", "table": "t", "column": "c"})
    assert await schema_hash(client) == seen[1]
    await apply_ops(client, {"op": "drop_table", "table": "t"})
    assert await schema_hash(client) == empty


async def test_the_schema_hash_is_the_same_on_both_backends(
    tmp_path: Path, postgres_url: str, embedder: Embedder
) -> None:
    project = f"agree-{uuid.uuid4().hex[:12]}"  # Postgres may hold other tests' projects
    stores = {"local": open_local_store(tmp_path / "lore.db"), "postgres": open_postgres_store(postgres_url)}
    try:
        hashes: dict[str, list[str]] = {}
        for name, store in stores.items():
            server = build_server(LessonService(store, embedder, default_project="default"))
            async with connected(server) as client:
                seen = [await schema_hash(client, project)]
                for op in (
                    create_table(
                        "notes",
                        column("title", "text", nullable=False),
                        column("n", "integer", default=3),
                        column("score", "real"),
                        column("done", "boolean", nullable=False, default=False),
                        column("data", "json"),
                        column("due", "timestamp"),
                    ),
                    create_table("a_table", column("x", "text", default="hello")),
                    {"op": "rename_column", "table": "notes", "from": "score", "to": "rank"},
                    {"op": "alter_column_type", "table": "notes", "column": "n", "type": "real"},
                ):
                    seen.append((await apply_ops(client, op, project=project))["schema_hash"])
                hashes[name] = seen
        assert hashes["local"] == hashes["postgres"]
        assert len(set(hashes["local"])) == len(hashes["local"])
    finally:
        for store in stores.values():
            store.close()


async def test_tables_in_the_default_project_are_those_of_the_project_named_default(
    client: Client, notes: dict[str, Any]
) -> None:
    assert await call(client, "schema", project="default") == await call(client, "schema")
    assert await ids_of(client, "notes", "default") == [1, 2, 3]


async def test_sql_keywords_as_names_either_work_or_are_refused_cleanly(client: Client) -> None:
    """``order``, ``select``, ``user`` and ``group`` match the identifier rule; a store must quote
    them (or refuse them as reserved with a validation error), never fail with a SQL error."""
    operations = [
        create_table("order", column("select", "text"), column("user", "integer"), column("group", "text")),
        insert("order", {"select": "a", "user": 1, "group": "g"}),
    ]
    before = await state(client)
    result = await client.call_tool(
        "apply", {"plan": make_plan(before["schema"]["schema_hash"], *operations)}
    )
    if result.is_error:
        assert result.content[0].text.startswith("VALIDATION_ERROR: "), result.content[0].text[:300]
        assert await state(client) == before
        return
    rows = await all_rows(
        client, "order", where=[cond("user", "=", 1)], order_by=[{"column": "group", "direction": "asc"}]
    )
    assert rows == [{"id": 1, "select": "a", "user": 1, "group": "g"}]


# --- apply: every operation -------------------------------------------------------------------


async def test_apply_creates_a_table_inserts_rows_and_reports_a_commit(client: Client) -> None:
    before = await schema_hash(client)
    result = await call(
        client,
        "apply",
        plan=make_plan(
            before, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS), message="notes"
        ),
    )
    assert set(result) >= {"commit_id", "seq", "schema_hash", "effects"}
    assert result["seq"] == 1
    assert isinstance(result["commit_id"], str) and result["commit_id"]
    assert HEX64.match(result["schema_hash"]) and result["schema_hash"] != before
    assert result["effects"]["rows"] == {"inserted": 3, "updated": 0, "deleted": 0}
    assert len(result["effects"]["schema"]) >= 1
    rows = await all_rows(client, "notes")
    assert rows == [
        {"id": 1, "title": "a", "n": 1, "done": False, "due": None},
        {"id": 2, "title": "b", "n": 2, "done": True, "due": None},
        {"id": 3, "title": "c", "n": 3, "done": False, "due": rows[2]["due"]},
    ]
    assert datetime.fromisoformat(rows[2]["due"]) == datetime.fromisoformat("2024-05-01T12:00:00+00:00")


async def test_ids_count_from_one_in_every_table_and_keep_counting(client: Client) -> None:
    await apply_ops(
        client,
        create_table("a", column("x", "integer")),
        create_table("b", column("x", "integer")),
        insert("a", {"x": 1}, {"x": 2}),
        insert("b", {"x": 1}),
    )
    await apply_ops(client, insert("a", {"x": 3}), insert("b", {"x": 2}))
    assert await ids_of(client, "a") == [1, 2, 3]
    assert await ids_of(client, "b") == [1, 2]


async def test_a_table_created_and_filled_in_one_plan_can_be_changed_in_the_same_plan(
    client: Client,
) -> None:
    await apply_ops(
        client,
        create_table("t", column("x", "integer")),
        insert("t", {"x": 1}, {"x": 2}, {"x": 3}),
        {"op": "update", "table": "t", "where": [cond("x", ">=", 2)], "set": {"x": 20}},
        {"op": "delete", "table": "t", "where": [cond("x", "=", 1)]},
        {"op": "add_column", "table": "t", "column": column("y", "text", default="d")},
    )
    assert await all_rows(client, "t") == [{"id": 2, "x": 20, "y": "d"}, {"id": 3, "x": 20, "y": "d"}]


async def test_add_column_appends_it_and_fills_existing_rows_with_the_default(
    client: Client, notes: dict[str, Any]
) -> None:
    result = await apply_ops(
        client,
        {"op": "add_column", "table": "notes", "column": column("tag", "text", nullable=False, default="x")},
        {"op": "add_column", "table": "notes", "column": column("extra", "json")},
    )
    assert result["effects"]["rows"]["inserted"] == result["effects"]["rows"]["deleted"] == 0
    assert result["schema_hash"] != notes["schema_hash"]
    columns = table_of(await call(client, "schema"), "notes")["columns"]
    assert [c["name"] for c in columns] == ["id", "title", "n", "done", "due", "tag", "extra"]
    assert columns[5] == {"name": "tag", "type": "text", "nullable": False, "default": "x"}
    rows = await all_rows(client, "notes")
    assert [(r["tag"], r["extra"]) for r in rows] == [("x", None)] * 3


async def test_a_not_null_column_without_default_can_be_added_to_an_empty_table(client: Client) -> None:
    await apply_ops(client, create_table("t", column("x", "integer")))
    await apply_ops(client, {"op": "add_column", "table": "t", "column": column("y", "text", nullable=False)})
    assert table_of(await call(client, "schema"), "t")["columns"][-1] == {
        "name": "y",
        "type": "text",
        "nullable": False,
        "default": None,
    }


async def test_drop_column_removes_it_and_its_values(client: Client, notes: dict[str, Any]) -> None:
    await apply_ops(client, {"op": "drop_column", "table": "notes", "column": "n"})
    columns = table_of(await call(client, "schema"), "notes")["columns"]
    assert [c["name"] for c in columns] == ["id", "title", "done", "due"]
    assert all("n" not in r for r in await all_rows(client, "notes"))
    assert [r["title"] for r in await all_rows(client, "notes")] == ["a", "b", "c"]


async def test_rename_column_keeps_its_place_and_its_values(client: Client, notes: dict[str, Any]) -> None:
    result = await apply_ops(client, {"op": "rename_column", "table": "notes", "from": "n", "to": "rank"})
    assert result["effects"]["rows"]["inserted"] == result["effects"]["rows"]["deleted"] == 0
    columns = table_of(await call(client, "schema"), "notes")["columns"]
    assert [c["name"] for c in columns] == ["id", "title", "rank", "done", "due"]
    assert [r["rank"] for r in await all_rows(client, "notes")] == [1, 2, 3]
    assert await ids_of(client, "notes", where=[cond("rank", ">", 1)]) == [2, 3]


async def test_alter_column_type_converts_the_values(client: Client, notes: dict[str, Any]) -> None:
    await apply_ops(client, {"op": "alter_column_type", "table": "notes", "column": "n", "type": "real"})
    column_n = table_of(await call(client, "schema"), "notes")["columns"][2]
    assert column_n == {"name": "n", "type": "real", "nullable": True, "default": None}
    await apply_ops(client, insert("notes", {"title": "d", "n": 2.5}))
    assert [r["n"] for r in await all_rows(client, "notes")] == [1.0, 2.0, 3.0, 2.5]
    await apply_ops(client, {"op": "alter_column_type", "table": "notes", "column": "n", "type": "text"})
    assert await ids_of(client, "notes", where=[cond("n", "=", "2.5")]) == [4]


async def test_drop_table_removes_it_and_its_rows(client: Client, notes: dict[str, Any]) -> None:
    await apply_ops(client, {"op": "drop_table", "table": "notes"})
    assert (await call(client, "schema"))["tables"] == []
    assert await schema_hash(client) == await schema_hash(client, "never-used")
    assert await schema_hash(client) != notes["schema_hash"]
    with pytest.raises(ToolFailed) as err:
        await call(client, "query_rows", table="notes")
    assert err.value.code == "NOT_FOUND"
    # A table of the same name starts again from id 1.
    await apply_ops(client, create_table("notes", column("x", "text")), insert("notes", {"x": "new"}))
    assert await all_rows(client, "notes") == [{"id": 1, "x": "new"}]


async def test_update_changes_only_matching_rows_and_reports_the_count(
    client: Client, notes: dict[str, Any]
) -> None:
    result = await apply_ops(
        client,
        {
            "op": "update",
            "table": "notes",
            "where": [cond("n", ">=", 2)],
            "set": {"title": "z", "done": True},
        },
    )
    assert result["effects"]["rows"] == {"inserted": 0, "updated": 2, "deleted": 0}
    assert result["effects"]["schema"] == []
    assert result["schema_hash"] == notes["schema_hash"]
    rows = await all_rows(client, "notes")
    assert [(r["title"], r["done"]) for r in rows] == [("a", False), ("z", True), ("z", True)]


async def test_update_can_set_a_nullable_column_to_null(client: Client, notes: dict[str, Any]) -> None:
    await apply_ops(client, {"op": "update", "table": "notes", "where": [], "set": {"n": None}})
    assert [r["n"] for r in await all_rows(client, "notes")] == [None, None, None]


async def test_delete_removes_matching_rows_and_ids_are_not_reused(
    client: Client, notes: dict[str, Any]
) -> None:
    result = await apply_ops(client, {"op": "delete", "table": "notes", "where": [cond("id", "=", 3)]})
    assert result["effects"]["rows"] == {"inserted": 0, "updated": 0, "deleted": 1}
    await apply_ops(client, insert("notes", {"title": "d"}))
    assert await ids_of(client, "notes") == [1, 2, 4]


async def test_delete_with_an_empty_where_removes_every_row(client: Client, notes: dict[str, Any]) -> None:
    result = await apply_ops(client, {"op": "delete", "table": "notes", "where": []})
    assert result["effects"]["rows"]["deleted"] == 3
    assert await all_rows(client, "notes") == []
    assert table_of(await call(client, "schema"), "notes")["row_count"] == 0


async def test_an_update_matching_nothing_succeeds_with_zero_counts(
    client: Client, notes: dict[str, Any]
) -> None:
    result = await apply_ops(
        client, {"op": "update", "table": "notes", "where": [cond("n", ">", 99)], "set": {"title": "q"}}
    )
    assert result["effects"]["rows"] == {"inserted": 0, "updated": 0, "deleted": 0}
    assert [r["title"] for r in await all_rows(client, "notes")] == ["a", "b", "c"]


# --- types ------------------------------------------------------------------------------------

TYPE_CASES = [
    ("text", ["plain", "naïve ☃ — ünïcode", 'it\'s "quoted"', "'); DROP TABLE t; --", ""], 42),
    ("integer", [0, -7, 2**53 + 1, 123456789], "many"),
    ("real", [0.0, -2.5, 1e-9, 12345.678], "lots"),
    ("boolean", [True, False], "yes"),
    ("json", [{"a": [1, 2, {"b": None}], "s": "ü"}, [1, "x", False], {"nested": {"deep": [[]]}}], None),
    (
        "timestamp",
        ["2024-05-01T12:00:00+00:00", "1999-12-31T23:59:59.500000+00:00", "2030-01-01T00:00:00+02:00"],
        "abc",
    ),
]


def same_value(type_: str, got: Any, want: Any) -> bool:
    if type_ == "timestamp":
        return isinstance(got, str) and datetime.fromisoformat(got) == datetime.fromisoformat(want)
    if type_ == "real":
        return isinstance(got, int | float) and not isinstance(got, bool) and got == pytest.approx(want)
    if type_ in ("integer", "boolean"):
        return type(got) is type(want) and got == want
    return got == want


@pytest.mark.parametrize(("type_", "values", "bad"), TYPE_CASES, ids=[c[0] for c in TYPE_CASES])
async def test_every_type_round_trips_its_values_and_null(
    client: Client, type_: str, values: list[Any], bad: Any
) -> None:
    await apply_ops(client, create_table("t", column("v", type_)))
    await apply_ops(client, insert("t", *({"v": v} for v in values), {"v": None}))
    rows = await all_rows(client, "t")
    assert [r["id"] for r in rows] == list(range(1, len(values) + 2))
    for row, want in zip(rows, values, strict=False):
        assert same_value(type_, row["v"], want), (type_, row["v"], want)
    assert rows[-1]["v"] is None
    assert [c["type"] for c in table_of(await call(client, "schema"), "t")["columns"]] == ["integer", type_]
    if bad is not None:
        before = await state(client)
        err = await apply_fails(client, insert("t", {"v": values[0]}), insert("t", {"v": bad}))
        assert err.code == "VALIDATION_ERROR"
        assert "operation 1" in err.message
        assert await state(client) == before


async def test_a_timestamp_filter_compares_instants(client: Client) -> None:
    await apply_ops(
        client,
        create_table("t", column("at", "timestamp")),
        insert(
            "t",
            {"at": "2024-01-01T00:00:00+00:00"},
            {"at": "2024-06-01T00:00:00+00:00"},
            {"at": "2025-01-01T00:00:00+00:00"},
        ),
    )
    assert await ids_of(client, "t", where=[cond("at", ">", "2024-03-01T00:00:00+00:00")]) == [2, 3]
    assert await ids_of(client, "t", where=[cond("at", "<=", "2024-06-01T00:00:00+00:00")]) == [1, 2]
    # The same instants written with other offsets compare the same way.
    assert await ids_of(client, "t", where=[cond("at", ">", "2024-06-01T01:00:00+02:00")]) == [2, 3]
    assert await ids_of(client, "t", where=[cond("at", "=", "2024-06-01T02:00:00+02:00")]) == [2]
    assert await ids_of(client, "t", where=[cond("at", "<", "2024-05-31T20:00:00-05:00")]) == [1, 2]
    assert await ids_of(client, "t", order_by=[{"column": "at", "direction": "desc"}]) == [3, 2, 1]


async def test_a_default_value_fills_rows_that_leave_the_column_out(client: Client) -> None:
    await apply_ops(
        client,
        create_table(
            "t",
            column("label", "text", nullable=False, default="none"),
            column("count", "integer", default=7),
            column("flag", "boolean", nullable=False, default=False),
            column("weight", "real", default=0.5),
        ),
        insert("t", {}, {"label": "given", "count": None}),
    )
    assert await all_rows(client, "t") == [
        {"id": 1, "label": "none", "count": 7, "flag": False, "weight": 0.5},
        {"id": 2, "label": "given", "count": None, "flag": False, "weight": 0.5},
    ]


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
    ([cond("name", "like", "AP%")], [1, 2]),  # LIKE is case-insensitive (README)
    ([cond("note", "!=", "x")], [3]),  # a comparison with null is false (README)
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
    if planned.is_error:
        # A plan that does not even parse may be refused outright, but only as a validation error.
        if not planned.content[0].text.startswith("VALIDATION_ERROR: ") or "VALIDATION_ERROR" not in accepted:
            return f"plan() failed with {planned.content[0].text[:300]!r}"
    else:
        result = planned.structured_content
        if result["ok"] is not False or [e["index"] for e in result["errors"]] != [1]:
            return f"plan() gave {result!r:.300}"
        if result["errors"][0]["code"] not in accepted:
            return f"plan() gave {result['errors']!r:.300}"
    if await state(client) != before:
        return "plan() changed something"

    applied = await client.call_tool("apply", {"plan": plan})
    if not applied.is_error:
        return f"apply() succeeded: {applied.structured_content!r:.300}"
    text = applied.content[0].text
    code, _, message = text.partition(": ")
    if code not in accepted:
        return f"apply() failed with {text[:300]!r}"
    if len(text) >= 1000 or "Traceback" in text or 'File "' in text:
        return f"apply() error is not a sentence: {text[:300]!r}"
    if not planned.is_error and "operation 1" not in message:
        return f"apply() error does not name operation 1: {text[:300]!r}"
    if await state(client) != before:
        return "apply() changed something"
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


# --- the README flow --------------------------------------------------------------------------


async def test_the_readme_flow_schema_plan_apply_history_revert_runs(client: Client) -> None:
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


README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example_calls() -> list[dict[str, Any]]:
    """The JSON tool calls of the README's worked example, in order."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### A worked example") :]
    section = section[: section.index("\n## ")]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.DOTALL)]


async def test_the_readme_worked_example_runs_as_written(client: Client) -> None:
    calls = readme_example_calls()
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
    # The README's next plan was written against the hash this apply returns, on any backend.
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
    assert err.value.code == "CONFLICT" and updated["commit_id"] in err.value.message

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


async def test_two_server_processes_on_one_file_never_both_apply_on_the_same_base(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    async with connected(stdio_params(db)) as one, connected(stdio_params(db)) as two:
        made = await apply_ops(one, create_table("notes", *NOTES_COLUMNS))
        base = made["schema_hash"]
        for _ in range(3):
            plans = [
                make_plan(
                    base, {"op": "add_column", "table": "notes", "column": column(f"c{n}_{base[:6]}", "text")}
                )
                for n in range(2)
            ]
            results = await asyncio.gather(
                one.call_tool("apply", {"plan": plans[0]}), two.call_tool("apply", {"plan": plans[1]})
            )
            won = [r for r in results if not r.is_error]
            assert len(won) == 1, [r.content[0].text[:200] for r in results]
            assert all(r.content[0].text.startswith("STALE_PLAN: ") for r in results if r.is_error)
            base = won[0].structured_content["schema_hash"]
        inserts = await asyncio.gather(
            *(
                call(client, "apply", plan=make_plan(base, insert("notes", {"title": f"{n}-{i}"})))
                for n, client in enumerate((one, two))
                for i in range(5)
            )
        )
        assert sorted(r["seq"] for r in inserts) == list(range(5, 15))
        assert await ids_of(one, "notes") == list(range(1, 11))
        history = (await call(two, "history", limit=100))["commits"]
        assert [c["seq"] for c in history] == list(range(14, 0, -1))
