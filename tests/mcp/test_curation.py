"""Curating memory (issue 35, items 1-3) through real MCP clients on both backends: a person's
reads on the page are no agent's recalls and spend a budget of their own; near-duplicates across
every lesson in one paged call, with pairs kept apart stored; a merge is one commit that keeps
both lessons' votes, previewed first."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from lore_mcp.app import build_server
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from stores import Scope
from stores.engine.lessons import LessonDraft
from tests.support.helpers import ToolFailed, call, vector
from tests.support.team import http_client, team_server

GROUPS = ("lessons", "structured", "history", "activity", "curation")
STRIPE = {"problem": "Stripe webhook signature fails behind nginx", "resolution": "Verify the raw body"}
REDIS = {"problem": "Redis evicts keys early", "resolution": "Set maxmemory-policy to allkeys-lru"}


@pytest.fixture
def server(service: LessonService) -> LoreServer:
    return build_server(service, tools=GROUPS)


def at_cosine(a: np.ndarray, cosine: float, seed: str) -> np.ndarray:
    """A unit vector whose cosine similarity with the unit vector ``a`` is exactly ``cosine``."""
    other = vector(seed)
    other = other - float(other @ a) * a
    other /= np.linalg.norm(other)
    return (cosine * a + np.sqrt(1 - cosine**2) * other).astype(np.float32)


async def test_a_pair_at_090_among_2000_lessons_comes_first_and_keep_both_is_stored(
    service: LessonService, server: LoreServer, backend: str
) -> None:
    """2,000 lessons on SQLite; 400 on Postgres, whose save of 2,000 takes 10 s (its HNSW index)."""
    scope = Scope(org=service.org, project="default")
    count = 2000 if backend == "local" else 400
    base, near = vector("webhooks"), vector("redis")
    items = [
        (LessonDraft(f"lesson {n} about topic {n}", f"fix number {n}"), vector(f"v{n}"))
        for n in range(count - 4)
    ]
    items += [
        (LessonDraft("Stripe webhook signature fails", "Verify the raw body"), base),
        (LessonDraft("Webhook signatures never match", "Sign the unparsed body"), at_cosine(base, 0.9, "s")),
        (LessonDraft("Redis evicts keys early", "Set maxmemory-policy"), near),
        (LessonDraft("Redis drops keys", "Raise maxmemory"), at_cosine(near, 0.82, "r")),
    ]
    for start in range(0, len(items), 500):
        service.store.save_many(scope, items[start : start + 500])
    async with Client(server) as client:
        found = await call(client, "find_duplicates", limit=1)
        [first] = found["pairs"]
        assert {first["a"]["problem"], first["b"]["problem"]} == {
            "Stripe webhook signature fails",
            "Webhook signatures never match",
        }
        assert first["similarity"] == pytest.approx(0.9, abs=1e-4) and found["total"] == 2
        second = await call(client, "find_duplicates", limit=1, cursor=found["next_cursor"])
        assert (
            second["pairs"][0]["similarity"] == pytest.approx(0.82, abs=1e-4)
            and second["next_cursor"] is None
        )
        assert (await call(client, "find_duplicates", threshold=0.85))["total"] == 1
        await call(client, "keep_both", a=first["b"]["id"], b=first["a"]["id"])
    async with Client(build_server(service, tools=GROUPS)) as other:  # another curator
        left = await call(other, "find_duplicates")
    assert [p["similarity"] for p in left["pairs"]] == [pytest.approx(0.82, abs=1e-4)]


async def test_a_merge_is_one_commit_that_keeps_both_lessons_votes(server: LoreServer) -> None:
    async with Client(server) as client:
        keep = await call(client, "save_lesson", **STRIPE, tags=["stripe"], confidence=0.6)
        other = await call(
            client,
            "save_lesson",
            problem="Stripe webhooks fail signature checks",
            resolution="Verify the raw body; nginx rewrites the JSON before the app.",
            tags=["nginx"],
            confidence=0.86,
        )
        await call(client, "upvote_lesson", id=keep["id"])
        for _ in range(4):
            await call(client, "upvote_lesson", id=other["id"])
        await call(client, "downvote_lesson", id=other["id"])
        commits = (await call(client, "history", limit=100))["commits"]

        preview = await call(client, "merge_lessons", keep=keep["id"], other=other["id"], dry_run=True)
        assert preview["dry_run"] and preview["combined"] == {
            "problem": "kept",
            "resolution": "other",
            "context": "kept",
        }
        assert (await call(client, "history", limit=100))["commits"] == commits  # nothing written
        assert (await call(client, "get_lesson", id=other["id"]))["upvotes"] == 4

        merged = await call(client, "merge_lessons", keep=keep["id"], other=other["id"])
        lesson = merged["lesson"]
        assert (lesson["upvotes"], lesson["downvotes"]) == (5, 1) and lesson == {
            **preview["lesson"],
            "updated_at": lesson["updated_at"],
        }
        assert lesson["resolution"] == "Verify the raw body; nginx rewrites the JSON before the app."
        assert sorted(lesson["tags"]) == ["nginx", "stripe"] and lesson["confidence"] == 0.86
        after = (await call(client, "history", limit=100))["commits"]
        assert len(after) == len(commits) + 1 and after[0]["kind"] == "merge"
        with pytest.raises(ToolFailed) as gone:
            await call(client, "get_lesson", id=other["id"])
        assert gone.value.code == "NOT_FOUND"
        got = await call(client, "recall_lessons", query="nginx rewrites the webhook body")
        assert [x["id"] for x in got["lessons"]] == [keep["id"]]

        await call(client, "revert_commit", commit_id=after[0]["id"])
        back = await call(client, "get_lesson", id=other["id"])
        assert back["upvotes"] == 4 and (await call(client, "get_lesson", id=keep["id"]))["upvotes"] == 1
        with pytest.raises(ToolFailed) as same:
            await call(client, "merge_lessons", keep=keep["id"], other=keep["id"])
        assert same.value.code == "VALIDATION_ERROR"


async def test_a_persons_recall_is_no_agents_recall_and_has_its_own_budget(store: Any, embedder: Any) -> None:
    """The page's key (known to the server as a person's) recalls: the lesson's recall count,
    "stale" and "agents only" leave it out. The page's calls count apart from the agents' calls
    of the same limit, so the page makes its six after the agent made four."""
    with team_server(store, embedder, tools=GROUPS, people=set(), rate_limit_per_minute=6) as lore:
        page = lore.keys.init_org("local")
        agent = lore.keys.create_key("local", name="agent", project=None, root=True)
    with team_server(store, embedder, tools=GROUPS, people={page.id}, rate_limit_per_minute=6) as lore:
        async with http_client(lore.url, agent.key) as client:
            saved = await call(client, "save_lesson", **STRIPE)
            redis = await call(client, "save_lesson", **REDIS)
            await call(client, "recall_lessons", query="stripe webhook signature", limit=1)
        async with http_client(lore.url, page.key) as person:
            for query in ("stripe webhook signature", "stripe nginx", "redis evicts keys"):
                await call(person, "recall_lessons", query=query)
            resource = json.loads(
                (await person.read_resource(f"lore://lessons/{saved['id']}")).contents[0].text
            )
            log = (await call(person, "recent_activity", kinds=["recall"]))["entries"]
            agents = (await call(person, "recent_activity", kinds=["recall"], agents_only=True))["entries"]
            stale = (await call(person, "recent_activity", stale_days=0))["stale_lessons"]
            with pytest.raises(MCPError) as limited:
                await call(person, "recall_lessons", query="one more")
        async with http_client(lore.url, agent.key) as client:
            await call(client, "get_lesson", id=saved["id"])  # the agent's budget was not spent
    assert resource["recalls"] == 1
    assert [e["person"] for e in log] == [True, True, True, False]
    assert [e["key_id"] for e in agents] == [agent.id]
    assert [s["id"] for s in stale] == [redis["id"]]
    assert str(limited.value).startswith("RATE_LIMITED: more than 6 tool calls in a minute on Lore's page")
