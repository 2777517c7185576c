"""Two real team-server processes on one Postgres, and one client whose every HTTP request goes
to the other replica than the one before (``tests.support.replicas``): no session affinity.

Both eras: a 2026-07-28 client (no sessions by design) and a handshake-era client, which the
replicas serve without sessions under ``LORE_STATELESS_HTTP`` with one shared
``LORE_REQUEST_STATE_SECRET``. Tools work across the replicas, a key's limit of tool calls is
spent once across both (discovery and listings are free), and a change made through one replica
reaches a ``subscriptions/listen`` stream held open on the other (Postgres LISTEN/NOTIFY).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from lore_mcp.services.keys import KeyService
from lore_mcp.transport.guards import FAILED_AUTH_PER_MINUTE
from stores import open_postgres_store
from tests.support.clients import no_deprecation_warnings
from tests.support.helpers import call
from tests.support.processes import lore, lore_http, server_env
from tests.support.replicas import alternating_client
from tests.support.stores import empty_postgres
from tests.support.team import initialize_body

LIMIT = 6
ERAS = ["2026-07-28", "legacy"]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[list[str]]:
    """The ``/mcp`` URLs of two ``lore-memory mcp --transport http`` processes on one emptied
    Postgres, serving without sessions with one request-state secret."""
    empty_postgres(postgres_url)
    logs = tmp_path_factory.mktemp("replicas")
    env = server_env(
        logs / "unused.db",
        LORE_STORE="postgres",
        LORE_DATABASE_URL=postgres_url,
        LORE_RATE_LIMIT_PER_MINUTE=str(LIMIT),
        LORE_STATELESS_HTTP="true",
        LORE_REQUEST_STATE_SECRET=secrets.token_hex(32),
        # So a test can act as a client address of its own (X-Forwarded-For from loopback).
        LORE_TRUSTED_PROXIES="127.0.0.1",
    )
    with lore_http(env, logs / "a.log") as a, lore_http(env, logs / "b.log") as b:
        yield [a, b]


def new_key(postgres_url: str, name: str) -> str:
    """A root key of its own org, so each test's limit starts from nothing."""
    store = open_postgres_store(postgres_url)
    try:
        return KeyService(store.keys).init_org(name).key
    finally:
        store.close()


@pytest.mark.parametrize("mode", ERAS)
async def test_a_lesson_saved_through_one_replica_is_recalled_through_the_other(
    replicas: list[str], postgres_url: str, mode: str
) -> None:
    key = new_key(postgres_url, f"tools-{mode.replace('-', '')}")
    async with alternating_client(replicas, key, mode=mode) as (client, robin):
        saved = await call(
            client,
            "save_lesson",
            problem="Replica B cannot find what replica A saved",
            resolution="Keep every replica's state in the one Postgres they share",
            tags=["replicas"],
        )
        recalls = []
        for _ in range(3):  # the client's own requests in between may shift the alternation
            found = await call(client, "recall_lessons", query="what replica A saved, found through B")
            recalls.append([lesson["id"] for lesson in found["lessons"]])
    saved_on = robin.tool_calls("save_lesson")[0]
    recalled_on = robin.tool_calls("recall_lessons")
    assert all(saved["id"] in ids for ids in recalls)
    assert 1 - saved_on in recalled_on, f"every recall went to the replica that saved: {robin.sent}"
    assert {s.replica for s in robin.sent} == {0, 1}
    # No session: no Mcp-Session-Id to be sticky on, no standing GET stream, no DELETE.
    assert {s.http_method for s in robin.sent} == {"POST"}


@pytest.mark.parametrize("mode", ERAS)
async def test_a_keys_limit_is_spent_once_across_both_replicas(
    replicas: list[str], postgres_url: str, mode: str
) -> None:
    key = new_key(postgres_url, f"limit-{mode.replace('-', '')}")
    async with alternating_client(replicas, key, mode=mode) as (client, robin):
        # A client run of five tool calls, with its listings and reads between them.
        with no_deprecation_warnings():
            assert (await client.list_tools()).tools
            await client.list_resources()
            await client.list_prompts()
        for i in range(5):
            await call(client, "list_lessons")
            if i == 2:  # a listing between calls, free as well
                assert (await client.list_tools()).tools
        five = robin.tool_calls()
        assert len(five) == 5 and set(five) == {0, 1}
        # It spent exactly five: one of the six is left, on whichever replica.
        await call(client, "list_lessons")
        for _ in range(2):  # the next call, and the one after on the other replica, are refused
            with pytest.raises(MCPError, match=f"^RATE_LIMITED: more than {LIMIT} tool calls"):
                await call(client, "list_lessons")
    refused = robin.tool_calls()[-2:]
    assert set(refused) == {0, 1}, robin.sent
    # Each replica answered fewer than the limit: a per-process count would have let both through.
    assert max(robin.tool_calls()[:LIMIT].count(r) for r in (0, 1)) < LIMIT


def test_stateless_http_on_postgres_needs_the_shared_secret(tmp_path: Path, postgres_url: str) -> None:
    env = server_env(
        tmp_path / "unused.db",
        LORE_STORE="postgres",
        LORE_DATABASE_URL=postgres_url,
        LORE_STATELESS_HTTP="true",
    )
    refused = lore(env, "mcp", "--transport", "http", "--port", "9")
    assert refused.returncode == 2
    assert "LORE_STATELESS_HTTP serves replicas behind a load balancer" in refused.stderr
    assert "LORE_REQUEST_STATE_SECRET" in refused.stderr and "Traceback" not in refused.stderr
    short = lore(env, "mcp", "--transport", "http", "--request-state-secret", "too-short-a-secret")
    assert short.returncode == 2
    assert "LORE_REQUEST_STATE_SECRET (--request-state-secret)" in short.stderr
    assert "at least 32 characters" in short.stderr and "too-short-a-secret" not in short.stderr


async def test_a_change_made_through_one_replica_reaches_a_listener_on_the_other(
    replicas: list[str], postgres_url: str
) -> None:
    key = new_key(postgres_url, "notices")
    async with alternating_client(replicas, key, mode="2026-07-28") as (client, robin):
        await call(client, "list_lessons")  # what the client fetches once (its tool listing) is done
        async with client.listen(resource_subscriptions=["lore://stats"]) as subscription:
            listening_on = next(s.replica for s in robin.sent if s.rpc_method == "subscriptions/listen")
            if robin.requests % 2 == listening_on:  # the save must go to the other replica
                await call(client, "list_lessons")
            await call(client, "save_lesson", problem="A notice between replicas", resolution="LISTEN/NOTIFY")
            with anyio.fail_after(20):
                event = await anext(subscription)
    assert robin.tool_calls("save_lesson") == [1 - listening_on], robin.sent
    assert str(getattr(event, "uri", event)) == "lore://stats"


@pytest.mark.parametrize("mode", ERAS)
async def test_without_sessions_the_handshake_promises_no_subscriptions_or_log_levels(
    replicas: list[str], postgres_url: str, mode: str
) -> None:
    """A handshake-era client served without sessions would have ``resources/subscribe`` and
    ``logging/setLevel`` forgotten when their request ends, so ``initialize`` does not offer them;
    2026-07-28 discovery still does (notices ride listen streams, logs ride each request)."""
    key = new_key(postgres_url, f"caps-{mode.replace('-', '')}")
    # "auto" reaches 2026-07-28 through server/discover, as a real client does (a pinned
    # version skips discovery and knows no capabilities)
    async with alternating_client(replicas, key, mode="legacy" if mode == "legacy" else "auto") as (
        client,
        _,
    ):
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        capabilities = client.server_capabilities
    assert capabilities.resources is not None and capabilities.tools is not None
    if mode == "legacy":
        assert capabilities.logging is None
        assert not capabilities.resources.subscribe
    else:
        assert capabilities.logging is not None
        assert capabilities.resources.subscribe


def test_failed_logins_from_one_address_are_limited_across_both_replicas(replicas: list[str]) -> None:
    """Bad keys from one address, alternating between the replicas: each replica alone would
    allow FAILED_AUTH_PER_MINUTE of them (twice that in all); counted in Postgres, the address
    gets its limit plus one failure per replica (the one that tells that replica), then 429
    on both, before any key lookup."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "X-Forwarded-For": "203.0.113.77",  # an address no other test of this module uses
    }
    statuses: list[int] = []
    for i in range(FAILED_AUTH_PER_MINUTE + 6):
        bad = {**headers, "Authorization": f"Bearer lore_sk_{i:032d}"}
        response = httpx2.post(replicas[i % 2], json=initialize_body(), headers=bad, timeout=30)
        statuses.append(response.status_code)
    assert statuses[: FAILED_AUTH_PER_MINUTE + 2] == [401] * (FAILED_AUTH_PER_MINUTE + 2), statuses
    assert statuses[FAILED_AUTH_PER_MINUTE + 2 :] == [429] * 4, statuses
    # Another address is not held back by this one's failures.
    other = {**headers, "X-Forwarded-For": "203.0.113.78", "Authorization": "Bearer lore_sk_" + "Z" * 32}
    assert [
        httpx2.post(url, json=initialize_body(), headers=other, timeout=30).status_code for url in replicas
    ] == [
        401,
        401,
    ]
