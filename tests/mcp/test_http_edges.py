"""The team server's HTTP edges: forwarded addresses, standing streams after revocation,
the id on refused requests, and what ``/healthz`` shows to whom.

Servers are real (``tests.support.team``: Lore's app under the team server's own uvicorn
configuration on a loopback socket). Clients come from distinct loopback addresses
(127.0.0.2, 127.0.0.3: every 127/8 address is this machine), so "the proxy", "the
attacker" and "the victim" are different TCP peers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from lore_mcp.cli.main import main as lore_main
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.settings import Settings
from lore_mcp.transport.guards import FAILED_AUTH_PER_MINUTE
from tests.support.helpers import call
from tests.support.processes import lore_env, lore_http
from tests.support.stores import open_store
from tests.support.team import (
    TeamServer,
    http_client,
    initialize_body,
    raw_post,
    raw_session,
    team_server,
    tool_call_body,
)

ACCEPT = "application/json, text/event-stream"
BAD = "Bearer lore_sk_" + "B" * 32  # well formed, never issued


@pytest.fixture
def local_store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Forwarded addresses do not depend on the backend: SQLite only."""
    store = open_store("local", tmp_path, request)
    yield store
    store.close()


def peer(address: str) -> httpx2.Client:
    """An HTTP client whose connections come from ``address`` (a loopback address)."""
    return httpx2.Client(transport=httpx2.HTTPTransport(local_address=address), timeout=30)


def post(client: httpx2.Client, url: str, authorization: str, forwarded: str | None = None) -> int:
    headers = {"Accept": ACCEPT, "Authorization": authorization}
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    return client.post(url, json=initialize_body(), headers=headers).status_code


# -- X-Forwarded-For only from a trusted proxy -----------------------------------------------


def test_without_trusted_proxies_forwarded_addresses_are_ignored(
    local_store: Any, embedder: Embedder
) -> None:
    with team_server(local_store, embedder) as server, peer("127.0.0.1") as local:
        server.keys.init_org("acme")
        # A client on the server's own machine (where the proxy of docs/team-server.md's setup runs)
        # names a new forwarded address with every bad key: its failures still count against it.
        statuses = [
            post(local, server.url, BAD, f"198.51.100.{i}") for i in range(FAILED_AUTH_PER_MINUTE + 5)
        ]
        assert statuses == [401] * FAILED_AUTH_PER_MINUTE + [429] * 5

    with (
        team_server(local_store, embedder) as server,
        peer("127.0.0.1") as attacker,
        peer("127.0.0.3") as victim,
    ):
        fresh = server.keys.create_key("acme", name="victim", project=None, root=False).key
        # Failures sent "from" the victim's address count against the sender, so the victim's
        # valid key, never used on this server before, still gets in.
        for _ in range(FAILED_AUTH_PER_MINUTE + 1):
            post(attacker, server.url, BAD, "127.0.0.3")
        assert post(attacker, server.url, BAD) == 429
        assert post(victim, server.url, f"Bearer {fresh}") == 200


def test_from_a_trusted_proxy_the_client_is_the_right_most_untrusted_forwarded_address(
    local_store: Any, embedder: Embedder
) -> None:
    with (
        team_server(local_store, embedder, trusted_proxies=("127.0.0.1", "10.0.0.0/8")) as server,
        peer("127.0.0.1") as proxy,
        peer("127.0.0.2") as direct,
    ):
        root = server.keys.init_org("acme")
        alice = server.keys.create_key("acme", name="alice", project=None, root=False).key
        # The client puts whatever it likes in the header; the proxy appends the address it saw,
        # and a trusted hop further in (10.1.2.3) is skipped.
        for i in range(FAILED_AUTH_PER_MINUTE):
            assert post(proxy, server.url, BAD, f"203.0.113.{i}, 198.51.100.7, 10.1.2.3") == 401
        assert post(proxy, server.url, BAD, "203.0.113.250, 198.51.100.7") == 429
        # Its neighbours behind the same proxy are not locked out.
        assert post(proxy, server.url, BAD, "198.51.100.8") == 401
        assert post(proxy, server.url, f"Bearer {alice}", "198.51.100.8") == 200
        # A client that is not a trusted proxy cannot name an address: it is counted as itself.
        for _ in range(FAILED_AUTH_PER_MINUTE):
            post(direct, server.url, BAD, "198.51.100.9")
        assert post(direct, server.url, BAD, "198.51.100.9") == 429
        assert post(proxy, server.url, f"Bearer {root.key}", "198.51.100.9") == 200


def test_forwarded_entries_that_are_not_addresses_name_no_client_of_their_own(
    local_store: Any, embedder: Embedder
) -> None:
    """A proxy that writes ``unknown`` or passes the client's header on verbatim: an entry that
    is not an IP address names nobody, so failures behind it count against the proxy, not
    against a fresh ``unknown-N`` each (issue 34, item 4)."""
    tokens = ["unknown-{}", "_hidden{}", "client{}.example", "198.51.100.7, unknown-{}", "[bad{}]:80"]
    with (
        team_server(local_store, embedder, trusted_proxies=("127.0.0.1", "10.0.0.0/8")) as server,
        peer("127.0.0.1") as proxy,
    ):
        server.keys.init_org("acme")
        statuses = [
            post(proxy, server.url, BAD, tokens[i % len(tokens)].format(i) + ", 10.1.2.3")
            for i in range(FAILED_AUTH_PER_MINUTE + 5)
        ]
        assert statuses == [401] * FAILED_AUTH_PER_MINUTE + [429] * 5, statuses
        # A client the proxy names by its address is still a client of its own.
        assert post(proxy, server.url, BAD, "198.51.100.8") == 401


def test_the_team_server_process_believes_only_the_proxies_its_setting_names(tmp_path: Path) -> None:
    env = lore_env(tmp_path / "team.db")
    for trusted, counted_as in (("", "the proxy"), ("127.0.0.1", "the forwarded client")):
        with (
            lore_http({**env, "LORE_TRUSTED_PROXIES": trusted}, tmp_path / "serve.log") as url,
            peer("127.0.0.1") as proxy,
        ):
            for _ in range(FAILED_AUTH_PER_MINUTE):
                post(proxy, url, BAD, "198.51.100.7")
            assert post(proxy, url, BAD, "198.51.100.7") == 429, counted_as
            # Another forwarded client is locked out too only when the header is ignored.
            assert post(proxy, url, BAD, "198.51.100.8") == (401 if trusted else 429), counted_as


def test_trusted_proxies_are_checked_and_normalised(capsys: pytest.CaptureFixture[str]) -> None:
    assert Settings().trusted_proxies == ""
    settings = Settings(trusted_proxies=" 127.0.0.1, 10.1.2.3/8,::1,127.0.0.1")
    assert settings.trusted_proxy_networks == ("127.0.0.1", "10.0.0.0/8", "::1")
    for bad in ("*", "proxy.internal", "10.0.0.0/33"):
        code = lore_main(["mcp", "--transport", "http", "--trusted-proxies", bad])
        err = capsys.readouterr().err
        assert code == 2
        assert "LORE_TRUSTED_PROXIES must list IP addresses or networks" in err and repr(bad) in err
        assert "Traceback" not in err


# -- a revoked key's standing stream ends and hears nothing more -----------------------------


class StandingStream:
    """A legacy session of one key, held open over raw HTTP with its GET stream read."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.ended = anyio.Event()

    def notices(self) -> list[str]:
        return [
            m["params"]["uri"] for m in self.messages if m.get("method") == "notifications/resources/updated"
        ]

    async def wait_for_notices(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.notices()) < count:
                await anyio.sleep(0.02)


def sse_json(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


@asynccontextmanager
async def standing_stream(url: str, key: str, uri: str) -> AsyncIterator[StandingStream]:
    """Initialize a session with ``key``, subscribe to ``uri`` and read the session's GET stream."""
    stream = StandingStream()
    headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        opened = await http.post(url, json=initialize_body())
        assert opened.status_code == 200
        headers = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
        subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}
        subscribed = await http.post(url, json=subscribe, headers=headers)
        assert sse_json(subscribed.text)[0]["result"] == {}
        listening = anyio.Event()

        async def read() -> None:
            async with http.stream(
                "GET", url, headers={**headers, "Accept": "text/event-stream"}
            ) as response:
                assert response.status_code == 200
                listening.set()
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        stream.messages.append(json.loads(line[5:]))
            stream.ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await listening.wait()
            yield stream
            tg.cancel_scope.cancel()


@pytest.fixture
def acme(store: Any, embedder: Embedder) -> Iterator[tuple[TeamServer, str, str, str]]:
    """A team server on each backend with acme's root key and bob's key (and bob's key id)."""
    with team_server(store, embedder) as server:
        root = server.keys.init_org("acme").key
        bob = server.keys.create_key("acme", name="bob", project=None, root=False)
        yield server, root, bob.key, bob.id


async def test_revoking_a_key_over_mcp_ends_its_standing_stream_at_once(
    acme: tuple[TeamServer, str, str, str],
) -> None:
    server, root, bob, bob_id = acme
    async with (
        standing_stream(server.url, bob, "lore://stats") as stream,
        http_client(server.url, root) as admin,
    ):
        await call(admin, "save_lesson", problem="the stream works", resolution="r")
        await stream.wait_for_notices(1)
        await call(admin, "revoke_key", id=bob_id)
        with anyio.fail_after(10):  # at once, not at the 15 s ping's re-check; margin for a busy machine
            await stream.ended.wait()
        for i in range(3):
            await call(admin, "save_lesson", problem=f"after the revocation {i}", resolution="r")
        await anyio.sleep(0.5)
        assert stream.notices() == ["lore://stats"]


async def test_a_key_revoked_elsewhere_hears_nothing_more_and_its_stream_ends(
    acme: tuple[TeamServer, str, str, str],
) -> None:
    server, root, bob, bob_id = acme
    async with (
        standing_stream(server.url, bob, "lore://stats") as stream,
        http_client(server.url, root) as admin,
    ):
        await call(admin, "save_lesson", problem="the stream works", resolution="r")
        await stream.wait_for_notices(1)
        # As `lore-memory keys revoke` or another replica does: straight in the shared store.
        server.keys.revoke_key("acme", bob_id)
        for i in range(3):
            await call(admin, "save_lesson", problem=f"after the revocation {i}", resolution="r")
        with anyio.fail_after(5):
            await stream.ended.wait()
        assert stream.notices() == ["lore://stats"]
    assert raw_post(server.url, f"Bearer {bob}").status_code == 401


async def test_a_valid_keys_stream_is_untouched_by_anothers_revocation(
    acme: tuple[TeamServer, str, str, str],
) -> None:
    server, root, bob, _ = acme
    carol = server.keys.create_key("acme", name="carol", project=None, root=False)
    async with (
        standing_stream(server.url, bob, "lore://stats") as stream,
        http_client(server.url, root) as admin,
    ):
        await call(admin, "revoke_key", id=carol.id)
        for i in range(3):
            await call(admin, "save_lesson", problem=f"lesson {i}", resolution="r")
        await stream.wait_for_notices(3)
        assert not stream.ended.is_set()


# -- refused requests carry their id ---------------------------------------------------------


def request(id: Any) -> dict[str, Any]:
    return {**initialize_body(), "id": id}


def test_a_rate_limited_request_gets_its_own_id_back(local_store: Any, embedder: Embedder) -> None:
    with team_server(local_store, embedder, rate_limit_per_minute=1) as server, peer("127.0.0.2") as http:
        key = server.keys.init_org("acme").key
        headers = raw_session(http, server.url, key)
        assert http.post(server.url, json=tool_call_body(1), headers=headers).status_code == 200
        for id in ("call-7", 8):
            limited = http.post(server.url, json=tool_call_body(id), headers=headers)
            assert limited.status_code == 429
            assert limited.json()["id"] == id
            assert limited.json()["error"]["message"].startswith("RATE_LIMITED: more than 1 tool calls")
        # A batch has no one id to give back.
        batch = http.post(server.url, json=[tool_call_body(9), tool_call_body(10)], headers=headers)
        assert batch.status_code == 429 and batch.json()["id"] is None
        # Notifications and other requests are not counted.
        note = http.post(
            server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        assert note.status_code == 202
        fresh = http.post(
            server.url, json=request(11), headers={"Accept": ACCEPT, "Authorization": f"Bearer {key}"}
        )
        assert fresh.status_code == 200

        for _ in range(FAILED_AUTH_PER_MINUTE):
            post(http, server.url, BAD)
        locked = http.post(
            server.url, json=request("after-30"), headers={"Accept": ACCEPT, "Authorization": BAD}
        )
        assert locked.status_code == 429
        assert locked.json()["id"] == "after-30"
        assert "failed authentications" in locked.json()["error"]["message"]


# -- /healthz --------------------------------------------------------------------------------


def test_healthz_checks_the_host_header_as_mcp_does(local_store: Any, embedder: Embedder) -> None:
    with team_server(local_store, embedder) as server:
        root = server.keys.init_org("acme").key
        evil = {"Host": "attacker.example"}
        mcp = httpx2.post(
            server.url,
            json=initialize_body(),
            headers={**evil, "Accept": ACCEPT, "Authorization": f"Bearer {root}"},
        )
        assert mcp.status_code == 421
        assert httpx2.get(f"{server.base}/healthz", headers=evil, timeout=10).status_code == 421
        assert (
            httpx2.get(f"{server.base}/healthz", headers={"Host": "localhost:1"}, timeout=10).status_code
            == 200
        )


def test_healthz_shows_details_only_to_a_root_key(local_store: Any, embedder: Embedder) -> None:
    with team_server(local_store, embedder) as server:
        root = server.keys.init_org("acme").key
        bob = server.keys.create_key("acme", name="bob", project=None, root=False).key
        health = f"{server.base}/healthz"
        anonymous = httpx2.get(health, timeout=10)
        assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
        member = httpx2.get(health, headers={"Authorization": f"Bearer {bob}"}, timeout=10)
        assert member.status_code == 200 and member.json() == {"status": "ok"}
        refused = httpx2.get(health, headers={"Authorization": BAD}, timeout=10)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer ")
        detailed = httpx2.get(health, headers={"Authorization": f"Bearer {root}"}, timeout=10).json()
        assert detailed["status"] == "ok" and detailed["store"] == "test" and detailed["version"]
        assert set(detailed["requests"]) == {"in_flight", "started"}
