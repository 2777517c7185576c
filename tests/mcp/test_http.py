"""The team server over real streamable HTTP: keys, scopes, orgs, revocation, rate limits.

Every test runs on both backends (the ``store`` fixture) against Lore's HTTP app on
a real socket, through the SDK's streamable-HTTP client.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from lore_mcp.embedding.embedder import Embedder
from stores import deadline
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.team import TeamServer, http_client, raw_post, raw_session, team_server, tool_call_body


@dataclass
class Team:
    server: TeamServer
    root: str  # acme's root key
    alice: str  # acme, project alpha only
    bob: str  # acme, every project, not root
    bob_id: str
    other: str  # root key of another org


@pytest.fixture
def team(store: Any, embedder: Embedder) -> Iterator[Team]:
    with team_server(store, embedder) as server:
        keys = server.keys
        root = keys.init_org("acme")
        alice = keys.create_key("acme", name="alice", project="alpha", root=False)
        bob = keys.create_key("acme", name="bob", project=None, root=False)
        other = keys.init_org("globex")
        yield Team(server, root.key, alice.key, bob.key, bob.id, other.key)


async def test_healthz_answers_without_a_key(team: Team) -> None:
    response = httpx2.get(f"{team.server.base}/healthz", timeout=10)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


async def test_healthz_counts_mcp_requests_and_not_itself(team: Team) -> None:
    # The counts are shown to a root key (see tests/mcp/test_http_edges.py), and asking is no MCP request.
    as_root = {"Authorization": f"Bearer {team.root}"}
    before = httpx2.get(f"{team.server.base}/healthz", headers=as_root, timeout=10).json()["requests"]
    assert raw_post(team.server.url, f"Bearer {team.root}").status_code == 200
    after = httpx2.get(f"{team.server.base}/healthz", headers=as_root, timeout=10).json()["requests"]
    assert after == {"in_flight": 0, "started": before["started"] + 1}


async def test_a_valid_key_gets_an_mcp_session(team: Team) -> None:
    assert raw_post(team.server.url, f"Bearer {team.root}").status_code == 200


async def test_every_bad_credential_is_the_same_401(team: Team) -> None:
    revoked = team.server.keys.create_key("acme", name="gone", project=None, root=False)
    team.server.keys.revoke_key("acme", revoked.id)
    unknown = "lore_sk_" + "A" * 32
    cases = {
        "missing": None,
        "not bearer": f"Basic {team.root}",
        "malformed": "Bearer lore_sk_short",
        "empty": "Bearer",
        "unknown": f"Bearer {unknown}",
        "revoked": f"Bearer {revoked.key}",
        "truncated": f"Bearer {team.root[:-1]}",
    }
    bodies = set()
    for name, header in cases.items():
        response = raw_post(team.server.url, header)
        assert response.status_code == 401, name
        assert response.headers["www-authenticate"].startswith("Bearer "), name
        bodies.add(response.text)
    # Nothing in the answer tells a guesser which case they hit.
    assert len(bodies) == 1


async def test_a_project_key_reads_and_writes_only_its_project(team: Team) -> None:
    async with http_client(team.server.url, team.root) as root:
        beta = await call(
            root, "save_lesson", problem="beta-only deploy quirk", resolution="x", project="beta"
        )
    async with http_client(team.server.url, team.alice) as alice:
        saved = await call(alice, "save_lesson", problem="alpha cache stampede", resolution="jitter the TTLs")
        lesson = await call(alice, "get_lesson", id=saved["id"])
        assert lesson["project"] == "alpha"
        assert (await call(alice, "get_lesson", id=saved["id"], project="alpha"))["id"] == saved["id"]
        for tool, args in [
            ("save_lesson", {"problem": "p", "resolution": "r", "project": "beta"}),
            ("recall_lessons", {"query": "deploy quirk", "project": "beta"}),
            ("get_lesson", {"id": beta["id"], "project": "beta"}),
            ("list_lessons", {"project": "beta"}),
            ("schema", {"project": "beta"}),
            ("history", {"project": "beta"}),
        ]:
            with pytest.raises(ToolFailed) as err:
                await call(alice, tool, **args)
            assert err.value.code == "FORBIDDEN", tool
            assert "alpha" in err.value.message
        with pytest.raises(ToolFailed) as err:
            await call(alice, "get_lesson", id=beta["id"])
        assert err.value.code == "NOT_FOUND"
        recalled = await call(alice, "recall_lessons", query="deploy quirk")
        assert [h["project"] for h in recalled["lessons"]] == ["alpha"]
        # lore://stats offers her only her project to switch to, though beta holds lessons.
        stats = json.loads((await alice.read_resource("lore://stats")).contents[0].text)
        assert (stats["project"], stats["projects"]) == ("alpha", ["alpha"])
    async with http_client(team.server.url, team.root) as root:
        listed = await call(root, "list_lessons", project="beta")
        assert [lesson["id"] for lesson in listed["lessons"]] == [beta["id"]]
        # Nothing alice was refused got written.
        assert (await call(root, "history", project="beta"))["commits"][0]["kind"] == "save"
        assert len((await call(root, "history", project="beta"))["commits"]) == 1


async def test_a_key_without_a_project_reaches_every_project_of_its_org(team: Team) -> None:
    async with http_client(team.server.url, team.bob) as bob:
        a = await call(bob, "save_lesson", problem="alpha lesson", resolution="r", project="alpha")
        b = await call(bob, "save_lesson", problem="beta lesson", resolution="r", project="beta")
        assert (await call(bob, "get_lesson", id=a["id"], project="alpha"))["project"] == "alpha"
        assert (await call(bob, "get_lesson", id=b["id"], project="beta"))["project"] == "beta"
        # lore://stats lists every project of the org that holds memory, for switching to.
        stats = json.loads((await bob.read_resource("lore://stats")).contents[0].text)
        assert {"alpha", "beta"} <= set(stats["projects"]) and stats["projects"] == sorted(stats["projects"])


async def test_nothing_crosses_orgs(team: Team) -> None:
    async with http_client(team.server.url, team.root) as acme:
        saved = await call(
            acme, "save_lesson", problem="acme secret sauce recipe", resolution="r", project="alpha"
        )
        await call(
            acme,
            "apply",
            project="alpha",
            plan={
                "baseSchemaHash": (await call(acme, "schema", project="alpha"))["schema_hash"],
                "message": "t",
                "operations": [
                    {"op": "create_table", "table": "notes", "columns": [{"name": "body", "type": "text"}]}
                ],
            },
        )
    async with http_client(team.server.url, team.other) as globex:
        with pytest.raises(ToolFailed) as err:
            await call(globex, "get_lesson", id=saved["id"], project="alpha")
        assert err.value.code == "NOT_FOUND"
        assert (await call(globex, "recall_lessons", query="secret sauce recipe", project="alpha"))[
            "lessons"
        ] == []
        assert (await call(globex, "list_lessons", project="alpha"))["lessons"] == []
        assert (await call(globex, "schema", project="alpha"))["tables"] == []
        assert (await call(globex, "history", project="alpha"))["commits"] == []
        for tool in ("upvote_lesson", "delete_lesson"):
            with pytest.raises(ToolFailed) as err:
                await call(globex, tool, id=saved["id"], project="alpha")
            assert err.value.code == "NOT_FOUND"
        keys = await call(globex, "list_keys")
        assert {k["org"] for k in keys["keys"]} == {"globex"}
        acme_keys = team.server.keys.list_keys("acme")
        with pytest.raises(ToolFailed) as err:
            await call(globex, "revoke_key", id=acme_keys[0].id)
        assert err.value.code == "NOT_FOUND"
    async with http_client(team.server.url, team.root) as acme:
        lesson = await call(acme, "get_lesson", id=saved["id"], project="alpha")
        assert lesson["upvotes"] == 0


async def test_only_root_keys_see_and_use_the_key_tools(team: Team) -> None:
    async with http_client(team.server.url, team.bob) as bob:
        names = {t.name for t in (await bob.list_tools()).tools}
        assert "save_lesson" in names and not names & {"create_key", "list_keys", "revoke_key"}
        for tool, args in [
            ("create_key", {"name": "x"}),
            ("list_keys", {}),
            ("revoke_key", {"id": team.bob_id}),
        ]:
            with pytest.raises(ToolFailed) as err:
                await call(bob, tool, **args)
            assert err.value.code == "FORBIDDEN", tool
    assert team.server.keys.list_keys("acme")[2].revoked_at is None
    async with http_client(team.server.url, team.root) as root:
        names = {t.name for t in (await root.list_tools()).tools}
        assert {"create_key", "list_keys", "revoke_key"} <= names
        created = await call(root, "create_key", name="ci", project="alpha")
        assert created["key"].startswith("lore_sk_") and len(created["key"]) == 40
        assert created["project"] == "alpha" and created["root"] is False
        listed = await call(root, "list_keys")
        text = str(listed)
        assert created["key"] not in text and team.root not in text and team.alice not in text
        assert {k["name"] for k in listed["keys"]} == {"root", "alice", "bob", "ci"}
        with pytest.raises(ToolFailed) as err:
            await call(root, "create_key", name="both", project="alpha", root=True)
        assert err.value.code == "VALIDATION_ERROR"
    async with http_client(team.server.url, created["key"]) as ci:
        assert (await call(ci, "save_lesson", problem="made with a new key", resolution="r"))["id"]


async def test_revocation_takes_effect_on_the_next_request(team: Team) -> None:
    async with http_client(team.server.url, team.bob) as bob:
        await call(bob, "list_lessons")
        async with http_client(team.server.url, team.root) as root:
            revoked = await call(root, "revoke_key", id=team.bob_id)
            assert revoked["revoked_at"] is not None
        # The session's next request carries the revoked key: the server answers 401.
        with pytest.raises(MCPError):
            await bob.call_tool("list_lessons", {})
    assert raw_post(team.server.url, f"Bearer {team.bob}").status_code == 401


async def test_key_tools_over_stdio_are_refused(client: Any) -> None:
    with pytest.raises(ToolFailed) as err:
        await call(client, "list_keys")
    assert err.value.code in ("FORBIDDEN", "NOT_FOUND")


async def test_commits_name_the_key_that_made_them(team: Team) -> None:
    async with http_client(team.server.url, team.alice) as alice:
        await call(alice, "save_lesson", problem="who wrote this", resolution="alice did")
        commits = (await call(alice, "history"))["commits"]
    assert commits[0]["actor"] == "key:alice"


def test_over_the_rate_limit_is_429_with_retry_after(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder, rate_limit_per_minute=3) as server:
        first = server.keys.init_org("acme")
        second = server.keys.create_key("acme", name="second", project=None, root=False)
        session = raw_session(httpx2, server.url, first.key)
        statuses = [
            httpx2.post(server.url, json=tool_call_body(i), headers=session, timeout=30).status_code
            for i in range(3)
        ]
        assert statuses == [200, 200, 200]
        limited = httpx2.post(server.url, json=tool_call_body(3), headers=session, timeout=30)
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert "RATE_LIMITED" in limited.text
        # Only tool calls count: the same key may still open a session.
        assert raw_post(server.url, f"Bearer {first.key}").status_code == 200
        # Each key has its own window, and health checks are not limited.
        other = raw_session(httpx2, server.url, second.key)
        assert httpx2.post(server.url, json=tool_call_body(4), headers=other, timeout=30).status_code == 200
        assert httpx2.get(f"{server.base}/healthz", timeout=10).status_code == 200
        # Unauthenticated requests are 401, never 429.
        assert raw_post(server.url, None).status_code == 401


async def test_a_client_over_the_limit_gets_a_rate_limited_error(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder, rate_limit_per_minute=6) as server:
        key = server.keys.init_org("acme").key
        async with http_client(server.url, key) as client:
            outcomes = []
            for _ in range(8):
                try:
                    await call(client, "list_lessons")
                    outcomes.append("ok")
                except MCPError as exc:
                    outcomes.append(str(exc))
    assert outcomes[:6] == ["ok"] * 6
    assert outcomes[-1].startswith("RATE_LIMITED: more than 6 tool calls in a minute")


async def test_http_client_without_key_cannot_connect(team: Team) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401 during the handshake
        async with http_client(team.server.url, None) as client:
            await client.list_tools()


__all__ = ["connected"]


def test_healthz_stays_200_while_a_write_within_its_deadline_holds_the_writer(
    store: Any, embedder: Embedder, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, item 6: heavy applies on SQLite hold its one writer for seconds, and /healthz
    waited for it and answered 503, so a liveness probe would restart a busy server. A write of
    this server still within its deadline is busy work; one held past it is a stuck writer."""
    if backend != "local":
        pytest.skip("SQLite's one writer; Postgres's health probe waits on no writer of the app")
    import stores.sqlite.lessons

    monkeypatch.setattr(stores.sqlite.lessons, "PROBE_WAIT_S", 0.0)  # no grace past a deadline
    holding, release = threading.Event(), threading.Event()

    def write(seconds: float) -> None:  # a write of the server's own, as an apply runs it
        with (
            contextlib.suppress(deadline.DeadlineExceeded),
            deadline.limit(seconds),
            store._backend.conns.writing(),
        ):
            holding.set()
            release.wait(30)  # the stuck one ends past its deadline: stopped, it changes nothing

    with team_server(store, embedder) as server:
        key = server.keys.init_org("local").key
        busy = threading.Thread(target=write, args=(30.0,))
        busy.start()
        holding.wait(10)
        during = httpx2.get(f"{server.base}/healthz", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        release.set()
        busy.join()
        holding.clear(), release.clear()
        stuck = threading.Thread(target=write, args=(0.5,))
        stuck.start()
        holding.wait(10)
        while time.monotonic() <= store._backend.conns.writer_until:  # held on the event past its deadline
            time.sleep(0.01)
        past = httpx2.get(f"{server.base}/healthz", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        release.set()
        stuck.join()
    assert during.status_code == 200, during.text
    assert during.elapsed.total_seconds() < 4.0  # answered at once, not after waiting for the writer
    assert past.status_code == 503 and "writer" in past.json()["detail"]
