"""The activity log Lore keeps (issue 26, item 1), through real MCP clients on both backends.

Every call that reads or changes memory leaves one entry in the transaction of its effect; a
failed call leaves only its code; agents read the log (``recent_activity``, group
``activity``; ``lore://activity``) and never write it; a key sees only its own project's log
and another org nothing; the log stays within its bounds; a recall's query is redacted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mcp import Client
from mcp_types import Implementation

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from stores import ActivityBounds, ConflictError, Scope, open_local_store, open_postgres_store
from stores.engine.activity import ActivityNote, ActivityQuery
from stores.engine.activity_rows import ActivityLog
from tests.support.helpers import ToolFailed, call
from tests.support.plans import apply_ops, column, create_table, insert
from tests.support.secrets import GITHUB_TOKEN, OPENAI_CLASSIC_KEY
from tests.support.team import http_client, team_server

GROUPS = ("lessons", "structured", "history", "activity")
STRIPE = {"problem": "Stripe webhook signature fails behind nginx", "resolution": "Verify the raw body"}
REDIS = {"problem": "Redis evicts keys early", "resolution": "Set maxmemory-policy to allkeys-lru"}


@pytest.fixture
def server(service: LessonService) -> LoreServer:
    return build_server(service, tools=GROUPS)


def agent(server: LoreServer, name: str = "test-agent") -> Client:
    return Client(server, client_info=Implementation(name=name, version="1.0"))


async def entries(agent: Client, **filters: Any) -> list[dict[str, Any]]:
    return (await call(agent, "recent_activity", **filters))["entries"]


async def test_each_call_leaves_one_entry_naming_what_it_touched(server: LoreServer) -> None:
    async with agent(server) as client:
        saved = await call(client, "save_lesson", **STRIPE)
        merged = await call(client, "save_lesson", **STRIPE)
        await call(client, "recall_lessons", query="stripe webhook signature")
        await call(client, "upvote_lesson", id=saved["id"])
        await call(client, "update_lesson", id=saved["id"], confidence=0.9)
        other = await call(client, "save_lesson", **REDIS)
        await call(client, "delete_lesson", id=other["id"])
        applied = await apply_ops(
            client, create_table("notes", column("v", "text")), insert("notes", {"v": "x"})
        )
        reverted = await call(client, "revert_commit", commit_id=applied["commit_id"])
        exported = {**STRIPE, "id": "01J0000000000000000000000A", "problem": "an imported lesson"}
        await call(client, "import_lessons", lessons=[exported])
        log = await entries(client, limit=100)
        history = {c["id"]: c for c in (await call(client, "history", limit=100))["commits"]}
    kinds = [e["kind"] for e in reversed(log)]
    assert kinds == [
        "save",
        "merge",
        "recall",
        "vote",
        "update",
        "save",
        "delete",
        "apply",
        "revert",
        "import",
    ]
    assert merged["merged"] and merged["id"] == saved["id"]
    by_kind = {e["kind"]: e for e in log}
    for entry in log:
        assert entry["client"] == "test-agent" and entry["key_id"] is None and entry["error"] is None
        if entry["kind"] != "recall":  # every change names the commit history shows
            assert history[entry["commit_id"]]["kind"] == entry["kind"]
    assert by_kind["vote"]["lesson_ids"] == [saved["id"]]
    assert by_kind["delete"]["lesson_ids"] == [other["id"]]
    assert by_kind["apply"]["tables"] == ["notes"] and by_kind["apply"]["commit_id"] == applied["commit_id"]
    assert by_kind["revert"]["commit_id"] == reverted["commit_id"] and by_kind["revert"]["tables"] == [
        "notes"
    ]
    assert by_kind["import"]["lesson_ids"] == ["01J0000000000000000000000A"]
    recall = by_kind["recall"]
    assert recall["query"] == "stripe webhook signature" and recall["commit_id"] is None
    assert [(r["id"], r["rank"]) for r in recall["results"]] == [(saved["id"], 1)]


async def test_a_recall_query_is_redacted_and_counted_on_the_lesson(server: LoreServer) -> None:
    async with agent(server, name=f"agent with {GITHUB_TOKEN}") as client:
        saved = await call(client, "save_lesson", **STRIPE)
        await call(client, "recall_lessons", query=f"stripe webhook fails, key {OPENAI_CLASSIC_KEY}")
        await call(client, "recall_lessons", query="nginx raw body")
        [last, first] = await entries(client, kinds=["recall"])
        resource = await client.read_resource(f"lore://lessons/{saved['id']}")
        latest = json.loads((await client.read_resource("lore://activity")).contents[0].text)
    text = json.dumps([first, last, latest])
    assert OPENAI_CLASSIC_KEY not in text and GITHUB_TOKEN not in text
    assert "[REDACTED:" in first["query"] and "[REDACTED:" in first["client"]
    assert last["query"] == "nginx raw body"
    lesson = json.loads(resource.contents[0].text)
    assert lesson["id"] == saved["id"] and lesson["recalls"] == 2
    assert datetime.fromisoformat(lesson["last_recalled_at"]) == datetime.fromisoformat(last["at"])
    assert [e["kind"] for e in latest["entries"]] == ["recall", "recall", "save"]


async def test_a_failed_call_changes_nothing_but_leaves_its_code(
    server: LoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry is appended in the save's own transaction: when that append fails, the lesson
    and its commit roll back with it, and the failure is then recorded on its own."""
    append = ActivityLog.append

    def failing_for_saves(
        self: ActivityLog, sql: Any, scope: Scope, note: ActivityNote, *a: Any, **kw: Any
    ) -> str:
        if note.kind == "save" and note.error is None:
            raise ConflictError("the log refused this entry, for this test")
        return append(self, sql, scope, note, *a, **kw)

    async with agent(server) as client:
        monkeypatch.setattr(ActivityLog, "append", failing_for_saves)
        with pytest.raises(ToolFailed) as failed:
            await call(client, "save_lesson", **STRIPE)
        monkeypatch.undo()
        assert failed.value.code == "CONFLICT"
        with pytest.raises(ToolFailed) as missing:
            await call(client, "update_lesson", id="01J0000000000000000000000B", confidence=0.2)
        assert missing.value.code == "NOT_FOUND"
        assert (await call(client, "list_lessons"))["lessons"] == []
        assert (await call(client, "history"))["commits"] == []
        log = await entries(client)
    assert [(e["kind"], e["error"]) for e in log] == [("update", "NOT_FOUND"), ("save", "CONFLICT")]
    assert all(e["lesson_ids"] == [] and e["commit_id"] is None and e["client"] == "test-agent" for e in log)


async def test_filters_and_pages(server: LoreServer) -> None:
    async with agent(server) as client:
        first = await call(client, "save_lesson", **STRIPE)
        second = await call(client, "save_lesson", **REDIS)
        for query in ("stripe webhook", "redis eviction", "nginx"):
            await call(client, "recall_lessons", query=query)
        await call(client, "downvote_lesson", id=second["id"])
        touching = await entries(client, lesson_id=second["id"])
        votes = await entries(client, kinds=["vote"])
        pages, cursor = [], None
        while True:
            page = await call(client, "recent_activity", limit=2, **({"cursor": cursor} if cursor else {}))
            pages.append([e["kind"] for e in page["entries"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        later = await entries(client, since=(datetime.now(UTC) + timedelta(minutes=1)).isoformat())
        earlier = await entries(client, until=(datetime.now(UTC) - timedelta(minutes=1)).isoformat())
        by_client = await entries(client, client_name="someone else")
        mine = await entries(client, client_name="test-agent", kinds=["save"])
        with pytest.raises(ToolFailed) as bad:
            await call(client, "recent_activity", kinds=["gossip"])
    kinds = [e["kind"] for e in touching]
    assert kinds[0] == "vote" and kinds[-1] == "save" and "recall" in kinds
    assert all(second["id"] in e["lesson_ids"] + [r["id"] for r in e["results"]] for e in touching)
    assert [e["lesson_ids"] for e in votes] == [[second["id"]]]
    assert pages == [["vote", "recall"], ["recall", "recall"], ["save", "save"]]
    assert later == [] and earlier == [] and by_client == [] and len(mine) == 2
    assert bad.value.code == "VALIDATION_ERROR"
    assert first["id"] != second["id"]


async def test_stale_lessons_are_old_ones_no_recall_returned(server: LoreServer) -> None:
    old = (datetime.now(UTC) - timedelta(days=90)).isoformat()
    lessons = [
        {**STRIPE, "id": "01J0000000000000000000000C", "created_at": old},
        {**REDIS, "id": "01J0000000000000000000000D", "created_at": old},
    ]
    async with agent(server) as client:
        await call(client, "import_lessons", lessons=lessons)
        await call(
            client, "save_lesson", problem="A fresh lesson about Kafka lag", resolution="Add partitions"
        )
        await call(client, "recall_lessons", query="stripe webhook signature nginx", limit=1)
        stale = await call(client, "recent_activity", stale_days=30)
        everything_old = await call(client, "recent_activity", stale_days=0)
    assert [s["id"] for s in stale["stale_lessons"]] == ["01J0000000000000000000000D"]
    assert stale["entries"] == [] and stale["next_cursor"] is None
    assert len(everything_old["stale_lessons"]) == 2  # the fresh one, and the unrecalled old one


async def test_the_activity_tools_are_off_by_default(service: LessonService) -> None:
    async with Client(build_server(service)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "recent_activity" not in names
        await call(client, "save_lesson", **STRIPE)
        latest = json.loads((await client.read_resource("lore://activity")).contents[0].text)
    assert [e["kind"] for e in latest["entries"]] == ["save"]


async def test_a_key_sees_only_its_own_projects_log(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder, tools=GROUPS) as team:
        team.keys.init_org("acme")
        alice = team.keys.create_key("acme", name="alice", project="alpha", root=False)
        bob = team.keys.create_key("acme", name="bob", project="beta", root=False).key
        globex = team.keys.init_org("globex").key
        async with http_client(team.url, alice.key) as client:
            saved = await call(client, "save_lesson", **STRIPE)
            await call(client, "recall_lessons", query="stripe webhook")
            own = await entries(client)
        async with http_client(team.url, bob) as client:
            theirs = await entries(client)
            latest = json.loads((await client.read_resource("lore://activity")).contents[0].text)
            with pytest.raises(ToolFailed) as forbidden:
                await call(client, "recent_activity", project="alpha")
            by_lesson = await entries(client, lesson_id=saved["id"])
        async with http_client(team.url, globex) as client:
            other_org = await entries(client, project="alpha")
            other_org_lesson = await entries(client, project="alpha", lesson_id=saved["id"])
    assert [e["kind"] for e in own] == ["recall", "save"]
    assert all(e["key_id"] == alice.id and e["client"] for e in own)
    assert theirs == [] and latest["entries"] == [] and by_lesson == []
    assert forbidden.value.code == "FORBIDDEN"
    assert other_org == [] and other_org_lesson == []


def reopened(store: Any, request: pytest.FixtureRequest, bounds: ActivityBounds) -> Any:
    """A second store on the same file or database, keeping ``bounds``."""
    if hasattr(store, "path"):
        return open_local_store(store._backend.path, activity_bounds=bounds)
    return open_postgres_store(request.getfixturevalue("postgres_url"), activity_bounds=bounds)


def test_the_log_keeps_its_bounds(store: Any, request: pytest.FixtureRequest) -> None:
    scope, other = Scope("local", "alpha"), Scope("local", "beta")
    counted = reopened(store, request, ActivityBounds(max_entries=3, trim_every=2))
    try:
        for n in range(7):
            counted.append_activity(scope, ActivityNote("recall", query=f"query {n}"))
        counted.append_activity(other, ActivityNote("recall", query="beta's only query"))
        kept = [e.note.query for e in counted.activity(scope, ActivityQuery(limit=100)).entries]
        # Trimmed at the 2nd, 4th and 6th append: at most trim_every - 1 more than the bound between.
        assert kept == ["query 6", "query 5", "query 4", "query 3"]
        assert [e.note.query for e in counted.activity(other, ActivityQuery()).entries] == [
            "beta's only query"
        ]
    finally:
        counted.close()
    aged = reopened(store, request, ActivityBounds(max_age_days=1e-9, trim_every=1))
    try:
        aged.append_activity(scope, ActivityNote("recall", query="the newest"))
        assert [e.note.query for e in aged.activity(scope, ActivityQuery()).entries] == ["the newest"]
    finally:
        aged.close()


def test_a_projects_traffic_never_trims_the_root_only_entries(
    store: Any, request: pytest.FixtureRequest
) -> None:
    """Issue 34, item 9: the bound holds per audience. A project key's recalls fill the entries
    it sees; key changes, which only root keys see, keep a bound of their own."""
    scope = Scope("local", "alpha")
    counted = reopened(store, request, ActivityBounds(max_entries=3, trim_every=1))
    try:
        for n in range(2):
            counted.append_activity(scope, ActivityNote("key", target=f"created:key-{n}"))
        for n in range(12):
            counted.append_activity(scope, ActivityNote("recall", query=f"query {n}"))
        kept = [
            e.note.target or e.note.query for e in counted.activity(scope, ActivityQuery(limit=100)).entries
        ]
        assert kept == ["query 11", "query 10", "query 9", "created:key-1", "created:key-0"]
        for n in range(2, 6):
            counted.append_activity(scope, ActivityNote("key", target=f"created:key-{n}"))
        keys = counted.activity(scope, ActivityQuery(kinds=("key",), limit=100)).entries
        assert [e.note.target for e in keys] == ["created:key-5", "created:key-4", "created:key-3"]
    finally:
        counted.close()


async def test_key_changes_are_logged_for_root_keys_only(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder, tools=GROUPS) as team:
        root = team.keys.init_org("acme")
        member = team.keys.create_key("acme", name="member", project=None, root=False).key
        async with http_client(team.url, root.key) as client:
            created = await call(client, "create_key", name="ci runner", project="alpha")
            await call(client, "revoke_key", id=created["id"])
            with pytest.raises(ToolFailed) as missing:
                await call(client, "revoke_key", id="no-such-key")
            seen_by_root = await entries(client, kinds=["key"])
        async with http_client(team.url, member) as client:
            seen_by_member = await entries(client)
            asked_by_member = await entries(client, kinds=["key"])
    assert missing.value.code == "NOT_FOUND"
    assert [(e["target"], e["error"]) for e in seen_by_root] == [
        (None, "NOT_FOUND"),
        (f"revoked:{created['id']}", None),
        (f"created:{created['id']}", None),
    ]
    assert all(e["key_id"] == root.id and created["key"] not in json.dumps(e) for e in seen_by_root)
    assert seen_by_member == [] and asked_by_member == []


async def test_the_log_and_history_name_lessons_by_their_problem(server: LoreServer) -> None:
    """People read ``titles`` (each named lesson's problem) and ``changed`` (each commit's
    lessons with the fields that differ), not ids; the fields every change touches are left out."""
    async with agent(server) as client:
        saved = await call(client, "save_lesson", **STRIPE)
        other = await call(client, "save_lesson", **REDIS)
        await call(client, "recall_lessons", query="stripe webhook signature")
        await call(client, "upvote_lesson", id=saved["id"])
        await call(
            client, "update_lesson", id=saved["id"], resolution="Verify the raw body, not the parsed one"
        )
        await call(client, "delete_lesson", id=other["id"])
        log = await call(client, "recent_activity", limit=10)
        commits = (await call(client, "history", limit=10))["commits"]
        full = await call(client, "get_commit", commit_id=commits[1]["id"])
    # A deleted lesson has no title: the page shows its id.
    assert log["titles"] == {saved["id"]: STRIPE["problem"]}
    changed = {c["kind"]: c["changed"] for c in commits}
    assert changed["vote"] == [
        {"table": "lessons", "id": saved["id"], "title": STRIPE["problem"], "fields": ["upvotes"]}
    ]
    assert changed["update"][0]["fields"] == ["resolution"]
    assert changed["delete"][0]["title"] == REDIS["problem"]
    assert full["changed"] == changed["update"]
