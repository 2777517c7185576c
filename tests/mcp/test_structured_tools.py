"""Structured memory through the MCP tools: schema, plan, apply and query_rows, on every backend.

Agents design their own tables with plans (a base schema hash, a message and a list of
operations); ``plan`` is the dry run, ``apply`` the atomic change, ``query_rows`` the read.
The helpers that build plans and call these tools are in ``tests/support/plans.py``.
"""

from __future__ import annotations

import re
import uuid
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
    column,
    cond,
    create_table,
    ids_of,
    insert,
    make_plan,
    schema_hash,
    state,
    table_of,
)

HEX64 = re.compile(r"^[0-9a-f]{64}$")
ID_COLUMN = {"name": "id", "type": "integer", "nullable": False, "default": None}
NEW_TOOLS = {"schema", "plan", "apply", "query_rows", "history", "get_commit", "revert_commit"}


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
