"""Bad input gets a tool error with a stable code, stores nothing, and the server keeps serving."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from stores import Store
from tests.support.bad_input import GOOD
from tests.support.helpers import ToolFailed, call

MISSING_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

BAD_CALLS: list[tuple[str, str, dict[str, Any], str]] = [
    ("empty problem", "save_lesson", {**GOOD, "problem": ""}, "VALIDATION_ERROR"),
    ("whitespace problem", "save_lesson", {**GOOD, "problem": "   \n\t "}, "VALIDATION_ERROR"),
    ("whitespace resolution", "save_lesson", {**GOOD, "resolution": "  "}, "VALIDATION_ERROR"),
    ("missing resolution", "save_lesson", {"problem": "x"}, "VALIDATION_ERROR"),
    ("confidence above 1", "save_lesson", {**GOOD, "confidence": 1.5}, "VALIDATION_ERROR"),
    ("confidence below 0", "save_lesson", {**GOOD, "confidence": -0.1}, "VALIDATION_ERROR"),
    ("confidence as text", "save_lesson", {**GOOD, "confidence": "high"}, "VALIDATION_ERROR"),
    ("1 MB problem", "save_lesson", {**GOOD, "problem": "x" * 1_000_000}, "VALIDATION_ERROR"),
    ("1 MB context", "save_lesson", {**GOOD, "context": "y" * 1_000_000}, "VALIDATION_ERROR"),
    ("problem as a number", "save_lesson", {**GOOD, "problem": 42}, "VALIDATION_ERROR"),
    ("tags as a string", "save_lesson", {**GOOD, "tags": "redis"}, "VALIDATION_ERROR"),
    ("tags as an object", "save_lesson", {**GOOD, "tags": {"any": ["redis"]}}, "VALIDATION_ERROR"),
    ("tags with a number", "save_lesson", {**GOOD, "tags": ["ok", 3]}, "VALIDATION_ERROR"),
    ("blank tag", "save_lesson", {**GOOD, "tags": ["ok", " "]}, "VALIDATION_ERROR"),
    ("too many tags", "save_lesson", {**GOOD, "tags": [f"t{i}" for i in range(40)]}, "VALIDATION_ERROR"),
    ("negative ttl", "save_lesson", {**GOOD, "ttl_days": -1}, "VALIDATION_ERROR"),
    ("bad project name", "save_lesson", {**GOOD, "project": "../etc"}, "VALIDATION_ERROR"),
    ("lone surrogate", "save_lesson", {**GOOD, "problem": "bad \ud800 text"}, "VALIDATION_ERROR"),
    ("limit 0", "recall_lessons", {"query": "redis", "limit": 0}, "VALIDATION_ERROR"),
    ("limit 500", "recall_lessons", {"query": "redis", "limit": 500}, "VALIDATION_ERROR"),
    ("empty query", "recall_lessons", {"query": " "}, "VALIDATION_ERROR"),
    (
        "tag filter as object",
        "recall_lessons",
        {"query": "redis", "tags": {"all": ["a"]}},
        "VALIDATION_ERROR",
    ),
    ("tag filter nested", "recall_lessons", {"query": "redis", "tags": [["a"]]}, "VALIDATION_ERROR"),
    ("min_confidence 2", "recall_lessons", {"query": "redis", "min_confidence": 2}, "VALIDATION_ERROR"),
    ("malformed id", "get_lesson", {"id": "not-an-id"}, "VALIDATION_ERROR"),
    ("sql in id", "get_lesson", {"id": "1' OR '1'='1"}, "VALIDATION_ERROR"),
    ("unknown id", "get_lesson", {"id": MISSING_ID}, "NOT_FOUND"),
    ("upvote unknown", "upvote_lesson", {"id": MISSING_ID}, "NOT_FOUND"),
    ("downvote malformed", "downvote_lesson", {"id": ""}, "VALIDATION_ERROR"),
    ("delete unknown", "delete_lesson", {"id": MISSING_ID}, "NOT_FOUND"),
    ("update unknown", "update_lesson", {"id": MISSING_ID, "problem": "x"}, "NOT_FOUND"),
    ("update nothing", "update_lesson", {"id": MISSING_ID}, "VALIDATION_ERROR"),
    ("update blank problem", "update_lesson", {"id": MISSING_ID, "problem": " "}, "VALIDATION_ERROR"),
    ("list limit 0", "list_lessons", {"limit": 0}, "VALIDATION_ERROR"),
    ("list bad cursor", "list_lessons", {"cursor": "garbage"}, "VALIDATION_ERROR"),
    ("unknown tool", "drop_everything", {}, "NOT_FOUND"),
]


@pytest.mark.parametrize(("case", "tool", "arguments", "code"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
async def test_bad_input_is_refused_with_a_code_and_changes_nothing(
    client: Client, store: Store, case: str, tool: str, arguments: dict[str, Any], code: str
) -> None:
    existing = await call(client, "save_lesson", **GOOD)
    before = await call(client, "get_lesson", id=existing["id"])

    result = await client.call_tool(tool, arguments)

    assert result.is_error, case
    text = result.content[0].text
    assert text.startswith(f"{code}: "), text[:300]
    assert len(text) < 1000, "error text must be a sentence, not an echo of the input"
    assert "Traceback" not in text and 'File "' not in text
    assert store.count("local") == 1
    assert await call(client, "get_lesson", id=existing["id"]) == before
    # The server keeps serving.
    assert (await call(client, "recall_lessons", query="redis eviction"))["lessons"][0]["id"] == existing[
        "id"
    ]


async def test_updating_an_existing_lesson_with_bad_values_leaves_it_unchanged(client: Client) -> None:
    saved = await call(client, "save_lesson", **GOOD)
    before = await call(client, "get_lesson", id=saved["id"])
    for bad in ({"confidence": 3}, {"problem": ""}, {"tags": "x"}, {"resolution": "z" * 20_000}):
        with pytest.raises(ToolFailed) as err:
            await call(client, "update_lesson", id=saved["id"], **bad)
        assert err.value.code == "VALIDATION_ERROR"
    assert await call(client, "get_lesson", id=saved["id"]) == before


async def test_an_unexpected_failure_is_reported_without_internals(client: Client, store: Store) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("secret internal detail at /srv/lore/db.py line 12")

    store.recall = broken  # type: ignore[method-assign]
    result = await client.call_tool("recall_lessons", {"query": "anything"})
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("INTERNAL_ERROR: ")
    assert "secret internal detail" not in text
    assert (await call(client, "save_lesson", **GOOD))["merged"] is False
