"""Structured memory from a test's side: building plans and calling the structured tools."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.support.helpers import ToolFailed, call


def column(name: str, type_: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def create_table(table: str, *columns: dict[str, Any]) -> dict[str, Any]:
    return {"op": "create_table", "table": table, "columns": list(columns)}


def insert(table: str, *rows: dict[str, Any]) -> dict[str, Any]:
    return {"op": "insert", "table": table, "rows": list(rows)}


def cond(column_name: str, op: str, value: Any) -> dict[str, Any]:
    return {"column": column_name, "op": op, "value": value}


def make_plan(base: str, *operations: dict[str, Any], message: str = "test plan") -> dict[str, Any]:
    return {"baseSchemaHash": base, "message": message, "operations": list(operations)}


def opt(project: str | None) -> dict[str, Any]:
    return {} if project is None else {"project": project}


async def schema_hash(client: Client, project: str | None = None) -> str:
    return (await call(client, "schema", **opt(project)))["schema_hash"]


async def apply_ops(
    client: Client, *operations: dict[str, Any], project: str | None = None, message: str = "test plan"
) -> dict[str, Any]:
    """Apply operations on top of the current schema."""
    base = await schema_hash(client, project)
    return await call(client, "apply", plan=make_plan(base, *operations, message=message), **opt(project))


async def dry_run(client: Client, *operations: dict[str, Any], project: str | None = None) -> dict[str, Any]:
    base = await schema_hash(client, project)
    return await call(client, "plan", plan=make_plan(base, *operations), **opt(project))


async def apply_fails(client: Client, *operations: dict[str, Any], project: str | None = None) -> ToolFailed:
    base = await schema_hash(client, project)
    with pytest.raises(ToolFailed) as err:
        await call(client, "apply", plan=make_plan(base, *operations), **opt(project))
    return err.value


async def all_rows(
    client: Client, table: str, *, project: str | None = None, page: int = 500, **query: Any
) -> list[dict[str, Any]]:
    """Every row of a query, following ``next_cursor`` to the end."""
    rows: list[dict[str, Any]] = []
    cursor = None
    for _ in range(1000):
        args = {"table": table, "limit": page, **query, **opt(project)}
        if cursor is not None:
            args["cursor"] = cursor
        got = await call(client, "query_rows", **args)
        assert len(got["rows"]) <= page
        rows += got["rows"]
        cursor = got["next_cursor"]
        if cursor is None:
            return rows
    pytest.fail("query_rows kept returning a next_cursor")


async def ids_of(client: Client, table: str, project: str | None = None, **query: Any) -> list[int]:
    return [r["id"] for r in await all_rows(client, table, project=project, **query)]


async def state(client: Client, project: str | None = None) -> dict[str, Any]:
    """Everything a plan could change: the schema (with its hash), every row, the newest commits."""
    schema = await call(client, "schema", **opt(project))
    rows = {t["name"]: await all_rows(client, t["name"], project=project) for t in schema["tables"]}
    commits = (await call(client, "history", **opt(project)))["commits"]
    return {"schema": schema, "rows": rows, "commits": [c["id"] for c in commits]}


def table_of(schema: dict[str, Any], name: str) -> dict[str, Any]:
    [table] = [t for t in schema["tables"] if t["name"] == name]
    return table


def codes(result: dict[str, Any]) -> list[str]:
    return [e["code"] for e in result["errors"]]


# A lesson saved beside the tables, to see that structured writes leave lessons alone.
LESSON = {"problem": "Redis evicts keys early", "resolution": "Set maxmemory-policy to allkeys-lru"}


NOTES_COLUMNS = [
    column("title", "text", nullable=False),
    column("n", "integer"),
    column("done", "boolean", nullable=False, default=False),
    column("due", "timestamp"),
]


NOTES_ROWS = [
    {"title": "a", "n": 1},
    {"title": "b", "n": 2, "done": True},
    {"title": "c", "n": 3, "due": "2024-05-01T12:00:00+00:00"},
]


ROWS = 20_000


def big_operations() -> list[dict[str, Any]]:
    return [
        create_table(
            "crash",
            column("n", "integer", nullable=False),
            column("label", "text"),
            column("score", "real"),
            column("flag", "boolean"),
        ),
        insert(
            "crash",
            *({"n": i, "label": f"row number {i}", "score": i / 7, "flag": i % 2 == 0} for i in range(ROWS)),
        ),
    ]
