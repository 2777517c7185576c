"""The agent-loop tools (issue 33) through a real MCP client, on both backends and both eras.

What the hooks rely on: session-start lessons within the budget, whole and with their ids; a
prompt's lessons only when they clearly match, never one already given in the session; the
answer in Claude Code's hook JSON (so an ``mcp_tool`` hook injects it); every injection and
ask an activity-log entry with its session and bytes; asks bounded per hour unless the person
wrote #remember; a dry run that only records; a project key's hooks kept in its own project.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.loop import LoopSettings
from lore_mcp.tools.context import Services
from lore_mcp.transport.server import LoreServer
from tests.support.helpers import call
from tests.support.team import http_client, team_server

GROUPS = ("lessons", "activity", "loop")
STRIPE = {
    "problem": "Stripe webhook signature verification fails behind nginx",
    "resolution": "nginx re-encoded the body; verify against the raw request body bytes",
}
ALEMBIC = {
    "problem": "Alembic migration adding an enum value fails on Postgres",
    "resolution": "Run ALTER TYPE ... ADD VALUE outside the transaction with an autocommit block",
}
GRADLE = {
    "problem": "Android Gradle plugin 8 requires Java 17",
    "resolution": "Point org.gradle.java.home at a JDK 17 in gradle.properties",
}


def loop_server(service: LessonService, **settings: Any) -> LoreServer:
    services = Services.over(service)
    return build_server(
        Services(services.lessons, services.transfer, services.tables, None, LoopSettings(**settings)),
        tools=GROUPS,
    )


@pytest.fixture
def server(service: LessonService) -> LoreServer:
    return build_server(service, tools=GROUPS)


def context_of(answer: dict[str, Any], event: str) -> str:
    """The text a Claude Code hook would inject from ``answer`` ('' for none)."""
    if not answer:
        return ""
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == event
    return str(out["additionalContext"])


async def saved(client: Client, *lessons: dict[str, str]) -> list[str]:
    return [(await call(client, "save_lesson", **lesson))["id"] for lesson in lessons]


async def test_session_start_gives_the_best_lessons_whole_with_their_ids(client: Client) -> None:
    stripe, alembic, gradle = await saved(client, STRIPE, ALEMBIC, GRADLE)
    await call(client, "upvote_lesson", id=alembic)
    text = context_of(await call(client, "session_context", session_id="s1"), "SessionStart")
    assert all(i in text for i in (stripe, alembic, gradle))
    assert text.index(alembic) < text.index(stripe), "the upvoted lesson comes first"
    assert STRIPE["resolution"] in text and "not instructions" in text


async def test_a_topic_branch_brings_its_lessons_first(client: Client) -> None:
    _, alembic, gradle = await saved(client, STRIPE, ALEMBIC, GRADLE)
    await call(client, "upvote_lesson", id=gradle)
    answer = await call(
        client,
        "session_context",
        session_id="s1",
        repository="payments-api",
        branch="fix/alembic-enum-migration",
    )
    text = context_of(answer, "SessionStart")
    first_lesson = text.splitlines()[1]
    assert alembic in first_lesson and "branch fix/alembic-enum-migration" in text.splitlines()[0]


async def test_session_start_stays_within_the_budget_and_never_cuts_a_lesson(service: LessonService) -> None:
    server = loop_server(service, session_chars=400)
    async with Client(server) as client:
        long = {"problem": "Flaky test " + "x" * 300, "resolution": "Pin the seed " + "y" * 300}
        ids = await saved(client, long, STRIPE, ALEMBIC)
        text = context_of(await call(client, "session_context", session_id="s1"), "SessionStart")
    assert len(text) <= 400
    assert ids[0] not in text, "a lesson longer than what is left is left out whole"
    whole = {
        i: f"- [{i}] {lesson['problem']} -> {lesson['resolution']}"
        for i, lesson in zip(ids, (long, STRIPE, ALEMBIC), strict=True)
    }
    given = text.splitlines()[1:]
    assert given and all(line in whole.values() for line in given), "each lesson is given whole"


async def test_a_matching_prompt_brings_its_lesson_once_and_an_unrelated_one_nothing(client: Client) -> None:
    stripe, *_ = await saved(client, STRIPE, ALEMBIC, GRADLE)
    prompt = "Stripe webhooks fail the signature check since we moved behind nginx, fix it"
    first = context_of(
        await call(client, "prompt_context", prompt=prompt, session_id="s1"), "UserPromptSubmit"
    )
    assert stripe in first and ALEMBIC["problem"] not in first
    again = await call(client, "prompt_context", prompt=prompt, session_id="s1")
    assert again == {}, "never a lesson already given in this session"
    other_session = await call(client, "prompt_context", prompt=prompt, session_id="s2")
    assert stripe in context_of(other_session, "UserPromptSubmit")
    unrelated = await call(
        client, "prompt_context", prompt="Write a haiku about autumn leaves", session_id="s1"
    )
    assert unrelated == {}


async def test_lessons_given_at_session_start_are_not_given_again_with_a_prompt(client: Client) -> None:
    stripe, *_ = await saved(client, STRIPE)
    assert stripe in context_of(await call(client, "session_context", session_id="s1"), "SessionStart")
    prompt = "the Stripe webhook signature verification fails behind nginx again"
    assert await call(client, "prompt_context", prompt=prompt, session_id="s1") == {}


async def test_each_injection_is_an_activity_entry_with_session_and_bytes(client: Client) -> None:
    stripe, *_ = await saved(client, STRIPE, ALEMBIC)
    start = await call(client, "session_context", session_id="sess-7")
    text = context_of(start, "SessionStart")
    entries = (await call(client, "recent_activity", kinds=["inject"]))["entries"]
    assert len(entries) == 1
    entry = entries[0]
    assert entry["session"] == "sess-7" and entry["bytes"] == len(text.encode())
    assert stripe in [r["id"] for r in entry["results"]]
    # An injection is not an agent's recall: the lesson's recall count stays as it was.
    recalls = (await call(client, "recent_activity", kinds=["recall"]))["entries"]
    assert recalls == []


async def test_asks_are_recorded_and_bounded_per_hour_unless_the_person_asked(service: LessonService) -> None:
    async with Client(loop_server(service, asks_per_hour=2)) as client:
        answers = [
            await call(client, "ask_to_save", session_id=f"s{n}", signal="`pytest` failed, then passed")
            for n in range(3)
        ]
        assert [a["ask"] for a in answers] == [True, True, False]
        forced = await call(client, "ask_to_save", session_id="s9", signal="#remember", remember=True)
        assert forced["ask"] is True
        entries = (await call(client, "recent_activity", kinds=["ask"]))["entries"]
    assert len(entries) == 3 and {e["session"] for e in entries} == {"s0", "s1", "s9"}
    assert entries[-1]["query"] == "`pytest` failed, then passed"


async def test_a_dry_run_only_records_what_it_would_have_asked(service: LessonService) -> None:
    async with Client(loop_server(service, dry_run=True)) as client:
        answer = await call(client, "ask_to_save", session_id="s1", signal="the person corrected the agent")
        kinds = [e["kind"] for e in (await call(client, "recent_activity"))["entries"]]
    assert answer == {"ask": False, "recorded": "would_ask", "why": "the person corrected the agent"}
    assert kinds == ["would_ask"]


async def test_turned_off_nothing_is_injected_or_asked(service: LessonService) -> None:
    async with Client(loop_server(service, inject=False, capture=False)) as client:
        await saved(client, STRIPE)
        assert await call(client, "session_context", session_id="s1") == {}
        assert await call(client, "prompt_context", prompt=STRIPE["problem"], session_id="s1") == {}
        assert (await call(client, "ask_to_save", session_id="s1", signal="x"))["ask"] is False
        assert (await call(client, "recent_activity"))["entries"][0]["kind"] == "save"


async def test_the_signal_is_redacted_before_it_is_recorded(client: Client) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    await call(client, "ask_to_save", session_id="s1", signal=f"`curl -H token:{secret}` failed, then passed")
    entry = (await call(client, "recent_activity", kinds=["ask"]))["entries"][0]
    assert secret not in entry["query"] and "REDACTED" in entry["query"]


async def test_a_project_key_keeps_its_hooks_in_its_own_project(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder, tools=GROUPS) as team:
        team.keys.init_org("acme")
        alice = team.keys.create_key("acme", name="alice", project="alpha", root=False).key
        async with http_client(team.url, alice) as client:
            stripe = (await call(client, "save_lesson", **STRIPE))["id"]
            # The hook names the repository's project; the key reaches only alpha, which it gets.
            answer = await call(client, "session_context", session_id="s1", project="payments-api")
            assert stripe in context_of(answer, "SessionStart")
            assert "project alpha" in context_of(answer, "SessionStart")


async def test_bad_session_ids_are_refused_with_a_sentence(client: Client) -> None:
    result = await client.call_tool("session_context", {"session_id": "\n\t"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("VALIDATION_ERROR: session_id must be")
