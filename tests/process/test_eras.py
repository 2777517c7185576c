"""Every tool, resource and prompt over real processes, in both MCP eras, on both transports.

The matrix is {stdio, streamable HTTP} x {legacy, 2026-07-28} (``tests/support/eras.py``): a
real ``lore-memory mcp`` serving every tool group, and a real ``mcp.Client`` that lists tools,
resources and prompts, calls every tool of the default groups and one of each other group once
with valid arguments, reads every resource, gets every prompt, and sends one bad call that must
come back with its stable code. stdio runs on the local store, one process per client since a
stdio server serves the client that started it; HTTP runs on Postgres, one server for the
module that both eras' clients talk to, so each era's run names its own lessons and table
and asserts only on what it made.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lore_mcp.tools.registry import DEFAULT_TOOL_GROUPS, TOOL_GROUPS
from stores.ids import new_id
from tests.support.bad_input import refused
from tests.support.clients import connected
from tests.support.eras import PROTOCOL_VERSIONS, client_mode
from tests.support.helpers import call
from tests.support.plans import column, create_table, insert, make_plan
from tests.support.processes import lore, lore_env, lore_http, stdio_params
from tests.support.stores import empty_postgres

# Every group, so the admin group (off by default) is served too.
ALL_GROUPS = ",".join(TOOL_GROUPS)
RESOURCES = {"lore://stats", "lore://schema", "lore://activity"}
TEMPLATES = {"lore://lessons/{id}", "lore://overview/{project}"}
PROMPTS = {"recall_before_task", "record_lesson"}


@dataclass
class Tour:
    """One era's client on one server, keeping the names of the tools it called."""

    client: Client
    era: str
    called: set[str] = field(default_factory=set)

    @property
    def slug(self) -> str:
        """The era as a name's suffix: lessons and tables of this run carry it."""
        return "legacy" if self.era == "legacy" else "current"

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        self.called.add(tool)
        return await call(self.client, tool, **arguments)


@dataclass(frozen=True)
class HttpServer:
    url: str
    root_key: str


@pytest.fixture(scope="module")
def http_server(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One ``lore-memory mcp --transport http`` on Postgres serving every group, with its root key."""
    empty_postgres(postgres_url)
    log = tmp_path_factory.mktemp("eras") / "http.log"
    # lore_env names a SQLite file too, which LORE_STORE=postgres leaves unused.
    env = {**lore_env(log.parent / "unused.db"), "LORE_STORE": "postgres", "LORE_DATABASE_URL": postgres_url}
    env["LORE_TOOLS"] = ALL_GROUPS
    init = lore(env, "init", "--json")
    assert init.returncode == 0, init.stderr
    with lore_http(env, log) as url:
        yield HttpServer(url=url, root_key=json.loads(init.stdout)["key"])


@contextlib.asynccontextmanager
async def http_client(server: HttpServer, era: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {server.root_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        connected(streamable_http_client(server.url, http_client=http), mode=client_mode(era)) as client,
    ):
        yield client


async def test_every_tool_resource_and_prompt_over_stdio(era: str, tmp_path: Path) -> None:
    params = stdio_params(tmp_path / "lore.db", LORE_TOOLS=ALL_GROUPS)
    async with connected(params, mode=client_mode(era)) as client:
        await tour(Tour(client, era))


async def test_every_tool_resource_and_prompt_over_http(era: str, http_server: HttpServer) -> None:
    async with http_client(http_server, era) as client:
        await tour(Tour(client, era))


async def tour(t: Tour) -> None:
    """The whole surface in one era: listings, every tool, every resource and prompt, bad input."""
    assert t.client.protocol_version == PROTOCOL_VERSIONS[t.era]
    await listings(t)
    lesson_id = await lesson_tools(t)
    await table_tools(t)
    await admin_tools(t)
    await activity_tools(t, lesson_id)
    await loop_tools(t, lesson_id)
    await curation_tools(t)
    await resources(t, lesson_id)
    await prompts(t)
    assert await refused(t.client, "save_lesson", problem="", resolution="x")
    assert await refused(t.client, "get_lesson", "NOT_FOUND", id=new_id())
    for group, names in TOOL_GROUPS.items():
        if group in DEFAULT_TOOL_GROUPS:
            assert set(names) <= t.called, f"not called in group {group}: {set(names) - t.called}"
        else:
            assert set(names) & t.called, f"write a call of one tool of group {group} in this tour"


async def listings(t: Tour) -> None:
    tools = {tool.name for tool in (await t.client.list_tools()).tools}
    assert tools == {name for names in TOOL_GROUPS.values() for name in names}
    assert {str(r.uri) for r in (await t.client.list_resources()).resources} >= RESOURCES
    templates = (await t.client.list_resource_templates()).resource_templates
    assert {r.uri_template for r in templates} == TEMPLATES
    assert {p.name for p in (await t.client.list_prompts()).prompts} == PROMPTS


async def lesson_tools(t: Tour) -> str:
    """Every tool of the lessons group; returns the id of a lesson that stays."""
    tag = f"era-{t.slug}"
    saved = await t.call(
        "save_lesson",
        problem=f"The {t.slug} client's nightly export stalls on shard seven",
        resolution=f"Raise the {t.slug} worker's queue limit to 400 and restart it",
        tags=[tag],
    )
    lesson = saved["id"]
    assert saved["merged"] is False and saved["redacted"] == []
    recalled = await t.call("recall_lessons", query="nightly export stalls", tags=[tag])
    assert [r["id"] for r in recalled["lessons"]] == [lesson] and recalled["lessons"][0]["score"] > 0
    assert (await t.call("upvote_lesson", id=lesson)) == {"id": lesson, "upvotes": 1, "downvotes": 0}
    assert (await t.call("downvote_lesson", id=lesson)) == {"id": lesson, "upvotes": 1, "downvotes": 1}
    updated = await t.call("update_lesson", id=lesson, confidence=0.9)
    assert updated["confidence"] == 0.9 and updated["id"] == lesson
    got = await t.call("get_lesson", id=lesson)
    assert got["confidence"] == 0.9 and got["tags"] == [tag] and got["upvotes"] == 1
    imported = new_id()
    added = await t.call(
        "import_lessons",
        lessons=[{"id": imported, "problem": f"{t.slug} cron fires twice", "resolution": "Pin the timezone"}],
    )
    assert added == {"added": 1, "skipped": 0, "merged": 0, "redacted": []}
    listed = await t.call("list_lessons", limit=100)
    assert {lesson, imported} <= {r["id"] for r in listed["lessons"]}
    exported = await t.call("export_lessons", limit=100)
    assert {lesson, imported} <= {r["id"] for r in exported["lessons"]}
    assert (await t.call("delete_lesson", id=imported)) == {"id": imported, "deleted": True}
    assert imported not in {r["id"] for r in (await t.call("list_lessons", limit=100))["lessons"]}
    return lesson


async def table_tools(t: Tour) -> None:
    """Every tool of the structured and history groups, on a table of this era's own."""
    table = f"notes_{t.slug}"
    ops = [
        create_table(table, column("title", "text"), column("done", "boolean")),
        insert(table, {"title": "tag the release", "done": False}),
    ]
    before = await t.call("schema")
    assert len(before["schema_hash"]) == 64
    plan = make_plan(before["schema_hash"], *ops, message=f"{table} made")
    planned = await t.call("plan", plan=plan)
    assert planned["ok"] is True and planned["effects"]["rows"]["inserted"] == 1
    applied = await t.call("apply", plan=plan)
    assert applied["schema_hash"] != before["schema_hash"]
    rows = await t.call("query_rows", table=table)
    assert [(r["title"], r["done"]) for r in rows["rows"]] == [("tag the release", False)]
    commits = (await t.call("history", target=table))["commits"]
    assert [c["message"] for c in commits] == [f"{table} made"]
    commit = await t.call("get_commit", commit_id=commits[0]["id"])
    assert commit["id"] == commits[0]["id"] and commit["kind"] == "apply"
    reverted = await t.call("revert_commit", commit_id=commits[0]["id"])
    assert reverted["reverted"] == commits[0]["id"]
    assert table not in {tb["name"] for tb in (await t.call("schema"))["tables"]}


async def admin_tools(t: Tour) -> None:
    """One tool of the admin group: the keys this server holds."""
    keys = (await t.call("list_keys"))["keys"]
    assert all(set(k) >= {"id", "name", "prefix", "root"} and "key" not in k for k in keys)


async def activity_tools(t: Tour, lesson_id: str) -> None:
    """The activity group: this run's lesson has its save, recall, votes and update logged."""
    entries = (await t.call("recent_activity", lesson_id=lesson_id, limit=100))["entries"]
    assert {e["kind"] for e in entries} >= {"save", "recall", "vote", "update"}, entries


async def loop_tools(t: Tour, lesson_id: str) -> None:
    """One tool of the loop group: a session's start gives this run's lesson, in Claude Code's
    hook answer."""
    answer = await t.call("session_context", session_id=f"tour-{t.era}")
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert lesson_id in answer["hookSpecificOutput"]["additionalContext"]


async def curation_tools(t: Tour) -> None:
    """One tool of the curation group: the project's near-duplicate pairs, most similar first."""
    pairs = (await t.call("find_duplicates", threshold=0.5))["pairs"]
    scores = [p["similarity"] for p in pairs]
    assert scores == sorted(scores, reverse=True)


async def resources(t: Tour, lesson_id: str) -> None:
    """Every listed resource reads as JSON (a resource added later included); the known ones say
    what this run made."""
    for listed in (await t.client.list_resources()).resources:
        read = (await t.client.read_resource(listed.uri)).contents
        assert len(read) == 1 and isinstance(json.loads(read[0].text), dict), listed.uri
    stats = json.loads((await t.client.read_resource("lore://stats")).contents[0].text)
    assert stats["lessons"] >= 1
    schema = json.loads((await t.client.read_resource("lore://schema")).contents[0].text)
    assert schema["schema_hash"] == (await t.call("schema"))["schema_hash"]
    lesson = json.loads((await t.client.read_resource(f"lore://lessons/{lesson_id}")).contents[0].text)
    assert lesson["id"] == lesson_id and lesson["confidence"] == 0.9


async def prompts(t: Tour) -> None:
    recall = await t.client.get_prompt("recall_before_task", {"task": "upgrade the billing database"})
    assert "upgrade the billing database" in recall.messages[0].content.text
    record = await t.client.get_prompt("record_lesson", {"what_happened": "the cron fired twice"})
    assert "save_lesson" in record.messages[0].content.text
