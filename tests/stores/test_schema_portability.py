"""The published schemas of the any-JSON plan fields still accept every JSON value.

``ColumnSpec.default`` and ``RowFilter.value`` are published as every JSON type spelled out
(``lore_mcp.services.plan_models.JsonValue``) rather than as a schema with no keyword, which
portability checks flag (tests/process/test_inspector.py runs the MCP Inspector's check over the
whole listing). Clients that check arguments against the input schema before sending must
still let through everything the server's own validation (pydantic) accepts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.plan_models import PlanModel
from stores import open_local_store
from tests.support.clients import connected

JSON_VALUES: list[Any] = [
    "",
    "text",
    0,
    -3,
    2**63,
    1.5,
    1e308,
    True,
    False,
    None,
    [],
    [1, "a", None, [2.5]],
    {},
    {"a": {"b": [1, None]}},
]


@pytest.fixture
async def input_schemas(embedder: Embedder, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """Each listed tool's input schema, as a client sees it (the same on every backend)."""
    store = open_local_store(tmp_path / "lore.db")
    try:
        server = build_server(LessonService(store, embedder, default_project="default"))
        async with connected(server) as client:
            yield {t.name: t.input_schema for t in (await client.list_tools()).tools}
    finally:
        store.close()


def plan_with(value: Any) -> dict[str, Any]:
    """A plan that puts ``value`` in both any-JSON fields: a column default and a filter."""
    return {
        "baseSchemaHash": "0" * 64,
        "operations": [
            {
                "op": "create_table",
                "table": "t",
                "columns": [{"name": "c", "type": "json", "default": value}],
            },
            {"op": "delete", "table": "t", "where": [{"column": "c", "op": "=", "value": value}]},
        ],
    }


@pytest.mark.parametrize("tool", ["plan", "apply"])
async def test_plan_schemas_accept_every_json_value_pydantic_does(
    input_schemas: dict[str, Any], tool: str
) -> None:
    validator = Draft202012Validator(input_schemas[tool])
    for value in JSON_VALUES:
        PlanModel.model_validate(plan_with(value))  # the server's own check accepts it
        errors = [e.message for e in validator.iter_errors({"plan": plan_with(value)})]
        assert errors == [], f"{value!r}: {errors}"


async def test_query_filters_accept_every_json_value(input_schemas: dict[str, Any]) -> None:
    validator = Draft202012Validator(input_schemas["query_rows"])
    for value in JSON_VALUES:
        arguments = {"table": "t", "where": [{"column": "c", "op": "=", "value": value}]}
        errors = [e.message for e in validator.iter_errors(arguments)]
        assert errors == [], f"{value!r}: {errors}"
