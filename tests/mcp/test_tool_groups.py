"""Lean tool sets (LORE_TOOLS), key tools over stdio, prompts, resources and instructions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import ValidationError

from lore_mcp.app import build_server
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.settings import Settings
from lore_mcp.tools.registry import DEFAULT_TOOL_GROUPS, TOOL_GROUPS
from stores import open_local_store
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call


async def test_lore_tools_serves_only_the_chosen_groups(service: LessonService) -> None:
    async with connected(build_server(service, tools=("lessons",))) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == set(TOOL_GROUPS["lessons"])
        with pytest.raises(ToolFailed) as err:
            await call(client, "schema")
        assert err.value.code == "NOT_FOUND"
    async with connected(build_server(service, tools=("structured", "history"))) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == set(TOOL_GROUPS["structured"]) | set(TOOL_GROUPS["history"])


async def test_servers_made_in_one_process_each_answer_from_their_own_store(
    service: LessonService, tmp_path: Path
) -> None:
    """Tools are made once per process (lore_mcp.tools.lore_tools); each call still reaches
    the services of the server it was made to."""
    other_store = open_local_store(tmp_path / "other.db")
    try:
        other = LessonService(other_store, service.embedder, default_project="default")
        async with connected(build_server(service)) as first, connected(build_server(other)) as second:
            saved = await call(first, "save_lesson", problem="Only in the first store", resolution="r")
            assert [x["id"] for x in (await call(first, "list_lessons"))["lessons"]] == [saved["id"]]
            assert (await call(second, "list_lessons"))["lessons"] == []
            with pytest.raises(ToolFailed) as err:
                await call(second, "get_lesson", id=saved["id"])
            assert err.value.code == "NOT_FOUND"
    finally:
        other_store.close()


async def test_the_default_groups_leave_out_the_key_tools(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert names == {n for g in DEFAULT_TOOL_GROUPS for n in TOOL_GROUPS[g]}


def test_lore_tools_is_checked() -> None:
    assert Settings(tools=" history , lessons,history").tool_groups == ("history", "lessons")
    for bad in ("", "lessons,everything", ","):
        with pytest.raises(ValidationError):
            Settings(tools=bad)
    out = subprocess.run(
        [sys.executable, "-m", "lore_mcp", "mcp", "--tools", "lessons,bogus"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "unknown: bogus" in out.stderr


async def test_the_admin_group_manages_keys_of_the_local_org_over_stdio(service: LessonService) -> None:
    keys = KeyService(service.store.keys)  # type: ignore[attr-defined]
    server = build_server(service, keys=keys, tools=(*DEFAULT_TOOL_GROUPS, "admin"))
    async with connected(server) as client:
        assert {"create_key", "list_keys", "revoke_key"} <= {
            t.name for t in (await client.list_tools()).tools
        }
        with pytest.raises(ToolFailed) as err:
            await call(client, "create_key", name="early")
        assert err.value.code == "VALIDATION_ERROR" and "lore-memory init" in err.value.message
        keys.init_org("local")
        created = await call(client, "create_key", name="laptop", project="alpha")
        assert created["org"] == "local" and created["key"].startswith("lore_sk_")
        listed = await call(client, "list_keys")
        assert [k["name"] for k in listed["keys"]] == ["root", "laptop"]
        assert (await call(client, "revoke_key", id=created["id"]))["revoked_at"] is not None


async def test_prompts_lead_to_the_tools(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == {"recall_before_task", "record_lesson"}
    recall = await client.get_prompt("recall_before_task", {"task": "migrate the billing DB to Postgres 16"})
    text = recall.messages[0].content.text
    assert "recall_lessons" in text and "migrate the billing DB to Postgres 16" in text
    record = await client.get_prompt("record_lesson", {})
    assert "save_lesson" in record.messages[0].content.text


async def test_instructions_name_the_habits(client: Client) -> None:
    instructions = client.instructions or ""
    for tool in ("recall_lessons", "save_lesson", "upvote_lesson", "plan", "apply", "revert_commit"):
        assert tool in instructions


def _resource_json(result: Any) -> dict[str, Any]:
    return json.loads(result.contents[0].text)


async def test_schema_and_stats_resources_describe_the_memory(client: Client) -> None:
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"lore://schema", "lore://stats"} <= uris
    empty = _resource_json(await client.read_resource("lore://stats"))
    assert (empty["lessons"], empty["tables"], empty["commits"]) == (0, 0, 0)
    await call(client, "save_lesson", problem="first", resolution="r")
    await call(client, "save_lesson", problem="a completely different second thing", resolution="r2")
    schema = await call(client, "schema")
    await call(
        client,
        "apply",
        plan={
            "baseSchemaHash": schema["schema_hash"],
            "message": "notes",
            "operations": [
                {"op": "create_table", "table": "notes", "columns": [{"name": "body", "type": "text"}]}
            ],
        },
    )
    stats = _resource_json(await client.read_resource("lore://stats"))
    assert (stats["lessons"], stats["tables"], stats["commits"], stats["project"]) == (2, 1, 3, "default")
    assert stats["projects"] == ["default"]
    await call(client, "save_lesson", problem="a lesson of the ops project", resolution="r", project="ops")
    stats = _resource_json(await client.read_resource("lore://stats"))
    assert (stats["projects"], stats["lessons"]) == (["default", "ops"], 2)
    as_resource = _resource_json(await client.read_resource("lore://schema"))
    assert as_resource == await call(client, "schema")


def test_lean_schemas_drop_titles_but_keep_a_property_named_title() -> None:
    from lore_mcp.transport.server import lean_schema

    schema = {
        "title": "Args",
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string"}, "n": {"title": "N", "type": "integer"}},
    }
    assert lean_schema(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
    }


def test_lean_schemas_keep_nullable_fields_as_any_of_branches() -> None:
    """``type: [T, null]`` would be shorter, but single-``type`` clients refuse it (see
    tests/process/test_inspector.py for the Inspector's portability check over the real listing)."""
    from lore_mcp.transport.server import lean_schema

    schema = {
        "properties": {
            "when": {
                "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
                "default": None,
                "title": "When",
            },
            "row": {"anyOf": [{"$ref": "#/$defs/Row"}, {"type": "null"}]},
        }
    }
    assert lean_schema(schema) == {
        "properties": {
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "default": None},
            "row": {"anyOf": [{"$ref": "#/$defs/Row"}, {"type": "null"}]},
        }
    }


async def test_listed_schemas_carry_no_generated_titles(client: Client) -> None:
    for tool in (await client.list_tools()).tools:
        assert '"title": "' not in json.dumps(tool.input_schema), tool.name
