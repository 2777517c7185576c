"""The lessons tools through a real MCP client (in-memory transport) and the real model."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import Store
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call

STRIPE = {
    "problem": "Stripe webhook signature verification fails in production",
    "resolution": "Verify against the raw request body; the framework was re-serialising the JSON.",
    "context": "Express behind nginx",
    "tags": ["Stripe", "webhooks"],
    "confidence": 0.8,
    "source": "incident 42",
}

EXPECTED_TOOLS = {
    "save_lesson",
    "recall_lessons",
    "upvote_lesson",
    "downvote_lesson",
    "get_lesson",
    "update_lesson",
    "delete_lesson",
    "list_lessons",
    "export_lessons",
    "import_lessons",
    "schema",
    "plan",
    "apply",
    "query_rows",
    "history",
    "get_commit",
    "revert_commit",
}


async def test_tools_list_names_every_tool_with_schemas_and_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == EXPECTED_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 20
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None
    assert tools["recall_lessons"].annotations.read_only_hint is True
    assert tools["get_lesson"].annotations.read_only_hint is True
    assert tools["delete_lesson"].annotations.destructive_hint is True
    assert tools["save_lesson"].annotations.read_only_hint is False
    recall_schema = tools["recall_lessons"].input_schema["properties"]["limit"]
    assert (recall_schema["minimum"], recall_schema["maximum"]) == (1, 50)
    assert tools["save_lesson"].input_schema["required"] == ["problem", "resolution"]


async def test_save_then_recall_returns_the_lesson_with_a_score(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    assert saved["merged"] is False and saved["redacted"] == []
    got = await call(client, "recall_lessons", query="webhook signature check failing", verbose=True)
    top = got["lessons"][0]
    assert top["id"] == saved["id"]
    assert top["tags"] == ["stripe", "webhooks"]
    assert top["project"] == "default"
    assert top["confidence"] == pytest.approx(0.8)
    assert 0 < top["score"] <= 1.5
    for key in ("problem", "resolution", "context", "source", "upvotes", "downvotes", "created_at"):
        assert key in top


async def test_results_are_compact_unless_verbose(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    compact = (await call(client, "recall_lessons", query="webhook signature check failing"))["lessons"][0]
    assert compact["id"] == saved["id"] and compact["score"] > 0
    assert set(compact) == {
        "id",
        "problem",
        "resolution",
        "context",
        "tags",
        "confidence",
        "project",
        "upvotes",
        "downvotes",
        "score",
    }
    full = (await call(client, "list_lessons", verbose=True))["lessons"][0]
    assert {"source", "created_at", "updated_at", "expires_at", "meta"} <= set(full)
    brief = (await call(client, "list_lessons"))["lessons"][0]
    assert "created_at" not in brief and brief["problem"] == STRIPE["problem"]


async def test_saving_the_same_lesson_twice_merges_and_says_so(client: Client) -> None:
    first = await call(client, "save_lesson", **STRIPE)
    again = await call(client, "save_lesson", **{**STRIPE, "tags": ["payments"]})
    assert again == {"id": first["id"], "merged": True, "redacted": [], "similar": []}
    lesson = await call(client, "get_lesson", id=first["id"])
    assert lesson["tags"] == ["stripe", "webhooks", "payments"]
    listed = await call(client, "list_lessons")
    assert len(listed["lessons"]) == 1


async def test_secrets_are_redacted_before_storing_and_reported(client: Client) -> None:
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
    saved = await call(
        client,
        "save_lesson",
        problem=f"Deploy failed with key {key}",
        resolution="Rotate the key stored in AWS as AKIAIOSFODNN7EXAMPLE and use the vault",
        context="DATABASE_URL=postgres://app:hunter2secret@db.internal:5432/prod",
    )
    assert saved["redacted"] == ["aws_access_key", "openai_key", "url_password"]
    lesson = await call(client, "get_lesson", id=saved["id"])
    stored = json.dumps(lesson)
    for secret in (key, "AKIAIOSFODNN7EXAMPLE", "hunter2secret"):
        assert secret not in stored
    assert "[REDACTED:openai_key]" in lesson["problem"]
    assert lesson["context"] == "DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/prod"


async def test_votes_count_and_are_returned(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "upvote_lesson", id=saved["id"])
    up = await call(client, "upvote_lesson", id=saved["id"])
    down = await call(client, "downvote_lesson", id=saved["id"])
    assert up == {"id": saved["id"], "upvotes": 2, "downvotes": 0}
    assert down == {"id": saved["id"], "upvotes": 2, "downvotes": 1}


async def test_update_changes_the_lesson_and_recall_follows_the_new_text(client: Client) -> None:
    saved = await call(client, "save_lesson", problem="Flaky test on CI", resolution="Retry it")
    updated = await call(
        client,
        "update_lesson",
        id=saved["id"],
        problem="Kubernetes pod evicted for exceeding its memory limit",
        resolution="Raise the limit and fix the leak",
        context="",
        tags=["k8s"],
        confidence=0.9,
    )
    assert updated["problem"].startswith("Kubernetes pod evicted")
    assert updated["context"] is None and updated["tags"] == ["k8s"] and updated["confidence"] == 0.9
    got = await call(client, "recall_lessons", query="container killed out of memory")
    assert got["lessons"][0]["id"] == saved["id"]


async def test_delete_removes_the_lesson(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    assert await call(client, "delete_lesson", id=saved["id"]) == {"id": saved["id"], "deleted": True}
    with pytest.raises(ToolFailed) as err:
        await call(client, "get_lesson", id=saved["id"])
    assert err.value.code == "NOT_FOUND"
    assert (await call(client, "recall_lessons", query="stripe webhook"))["lessons"] == []


async def test_list_lessons_pages_with_a_cursor(client: Client) -> None:
    topics = ["DNS", "TLS", "Redis", "Kafka", "Docker"]
    ids = [
        (await call(client, "save_lesson", problem=f"{t} outage number {i}", resolution=f"{t} fix {i}"))["id"]
        for i, t in enumerate(topics)
    ]
    first = await call(client, "list_lessons", limit=2)
    second = await call(client, "list_lessons", limit=2, cursor=first["next_cursor"])
    third = await call(client, "list_lessons", limit=2, cursor=second["next_cursor"])
    pages = [first, second, third]
    assert [x["id"] for p in pages for x in p["lessons"]] == list(reversed(ids))
    assert third["next_cursor"] is None


async def test_projects_are_separate_and_default_to_the_configured_one(
    store: Store, embedder: Embedder
) -> None:
    server = build_server(LessonService(store, embedder, default_project="team-a"))
    async with connected(server) as client:
        saved = await call(client, "save_lesson", **STRIPE)
        assert (await call(client, "get_lesson", id=saved["id"]))["project"] == "team-a"
        other = await call(client, "recall_lessons", query="stripe webhook", project="team-b")
        assert other["lessons"] == []
        with pytest.raises(ToolFailed) as err:
            await call(client, "get_lesson", id=saved["id"], project="team-b")
        assert err.value.code == "NOT_FOUND"
        mine = await call(client, "recall_lessons", query="stripe webhook", project="team-a")
        assert [x["id"] for x in mine["lessons"]] == [saved["id"]]


async def test_the_lesson_resource_serves_json(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    templates = (await client.list_resource_templates()).resource_templates
    assert sorted(t.uri_template for t in templates) == ["lore://lessons/{id}", "lore://overview/{project}"]
    result = await client.read_resource(f"lore://lessons/{saved['id']}")
    body = json.loads(result.contents[0].text)
    assert body["id"] == saved["id"] and body["problem"] == STRIPE["problem"]


async def test_ttl_days_sets_an_expiry(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE, ttl_days=2)
    lesson = await call(client, "get_lesson", id=saved["id"])
    assert lesson["expires_at"] is not None


async def test_more_concurrent_recalls_than_worker_threads_each_get_their_own_answer(
    service: LessonService,
) -> None:
    # Each recall's store thread waits for a query vector computed on another thread,
    # while other recalls' encodes go through the model together. Sixty at once, more
    # than anyio's 40 worker threads: all finish, and none gets another's vector.
    topics = {
        "Kafka consumer group rebalances in a loop": "consumer group keeps rebalancing",
        "Stripe webhook signature check fails": "stripe webhook signatures rejected",
        "Postgres connection pool exhausted under load": "too many database connections",
    }
    ids = {
        problem: (await service.save(problem=problem, resolution="see the runbook")).id for problem in topics
    }
    wanted = [(ids[problem], query) for problem, query in topics.items()] * 20
    found: dict[int, str] = {}

    async def recall(i: int, query: str) -> None:
        found[i] = (await service.recall(query=f"{query} (case {i})", limit=1)).lessons[0].id

    with anyio.fail_after(180):
        async with anyio.create_task_group() as tg:
            for i, (_, query) in enumerate(wanted):
                tg.start_soon(recall, i, query)
    assert [found[i] for i in range(len(wanted))] == [lesson_id for lesson_id, _ in wanted]
