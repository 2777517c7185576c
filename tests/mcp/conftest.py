"""Fixtures of the tests that call Lore's tools through a real MCP client in process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from tests.support.plans import NOTES_COLUMNS, NOTES_ROWS, apply_ops, column, create_table, insert

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
