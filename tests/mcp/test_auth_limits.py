"""Failed authentication is limited per client address, and costs no database lookup past the limit.

The team server runs on both backends with its key store wrapped to count lookups,
so "no lookup" is observed, not assumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.transport.guards import (
    FAILED_AUTH_PER_MINUTE,
    SlidingWindowLimiter,
    client_address,
    count_failure,
)
from stores import open_postgres_store
from tests.support.team import TeamServer, raw_post, team_server


class CountingKeys:
    """A key store that counts ``key_by_hash`` calls and otherwise is the real one."""

    def __init__(self, keys: Any) -> None:
        self._keys = keys
        self.lookups = 0

    def key_by_hash(self, key_hash: str) -> Any:
        self.lookups += 1
        return self._keys.key_by_hash(key_hash)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._keys, name)


class CountedStore:
    """The real store with its ``keys`` counted."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.keys = CountingKeys(store.keys)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def counted(store: Any, embedder: Embedder) -> Iterator[tuple[TeamServer, CountingKeys]]:
    wrapped = CountedStore(store)
    with team_server(wrapped, embedder) as server:
        yield server, wrapped.keys


def test_failed_authentication_from_one_address_is_limited_before_any_lookup(
    counted: tuple[TeamServer, CountingKeys],
) -> None:
    server, keys = counted
    root = server.keys.init_org("acme").key
    assert raw_post(server.url, f"Bearer {root}").status_code == 200  # accepted from this address
    revoked = server.keys.create_key("acme", name="gone", project=None, root=False)
    server.keys.revoke_key("acme", revoked.id)
    never_used = server.keys.create_key("acme", name="new", project=None, root=False).key
    failures = [None, f"Basic {root}", "Bearer lore_sk_short", f"Bearer {revoked.key}"]
    bodies = set()
    for i in range(FAILED_AUTH_PER_MINUTE):
        # Every kind of failure counts, unknown well-formed keys (each a different one) included.
        header = failures[i] if i < len(failures) else f"Bearer lore_sk_{i:032d}"
        response = raw_post(server.url, header)
        assert response.status_code == 401, (i, header)
        bodies.add(response.text)
    assert len(bodies) == 1  # the limit changes nothing about the 401 itself
    lookups = keys.lookups

    limited = raw_post(server.url, "Bearer lore_sk_" + "Z" * 32)
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert limited.json()["error"]["message"].startswith("RATE_LIMITED: more than 30 failed authentications")
    assert raw_post(server.url, "Bearer lore_sk_short").status_code == 429
    assert raw_post(server.url, None).status_code == 429
    # A key this server has not accepted yet waits like any other from this address.
    assert raw_post(server.url, f"Bearer {never_used}").status_code == 429
    assert keys.lookups == lookups  # none of these reached the key store

    # A key this server accepted before still works from here, and is still checked.
    assert raw_post(server.url, f"Bearer {root}").status_code == 200
    assert keys.lookups == lookups + 1
    assert httpx2.get(f"{server.base}/healthz", timeout=10).status_code == 200


def test_an_unknown_key_costs_one_lookup_and_a_key_created_afterwards_works_at_once(
    counted: tuple[TeamServer, CountingKeys],
) -> None:
    server, keys = counted
    server.keys.init_org("acme")
    unknown = "Bearer lore_sk_" + "U" * 32
    before = keys.lookups
    assert [raw_post(server.url, unknown).status_code for _ in range(3)] == [401, 401, 401]
    assert keys.lookups == before + 1
    created = server.keys.create_key("acme", name="late", project=None, root=False)
    assert raw_post(server.url, f"Bearer {created.key}").status_code == 200
    server.keys.revoke_key("acme", created.id)
    assert raw_post(server.url, f"Bearer {created.key}").status_code == 401  # revocation stays immediate


def test_failures_count_per_address_and_an_ipv6_client_per_slash_64() -> None:
    def of(host: str) -> str:
        return client_address({"client": (host, 1234)})

    assert of("192.0.2.1") != of("192.0.2.2")
    assert of("2001:db8:1:2::1") == of("2001:db8:1:2:ffff::9")
    assert of("2001:db8:1:2::1") != of("2001:db8:1:3::1")
    assert of("::ffff:192.0.2.1") == of("192.0.2.1")


@pytest.mark.parametrize("door", ["failed-auth", "failed-consent"])
async def test_failures_counted_in_postgres_lock_an_address_on_every_replica(
    postgres_url: str, door: str
) -> None:
    """``count_failure`` as two replicas run it (``/mcp``'s guard and the consent page each
    count their own door): each replica alone would allow the limit, twice it in all; with the
    count in Postgres, the address is locked on both after the limit plus one failure each."""
    store = open_postgres_store(postgres_url)
    try:
        shared = store.call_counts
        assert shared is not None
        replicas = [SlidingWindowLimiter(4), SlidingWindowLimiter(4)]
        address = f"198.51.100.{7 if door == 'failed-auth' else 8}"
        locked_after = []
        for i in range(6):
            replica = replicas[i % 2]
            assert replica.wait(address) is None, i  # let through to the (failing) lookup
            await count_failure(replica, address, shared, door=door)
            locked_after.append([r.wait(address) is not None for r in replicas])
        # Four failures fill the shared count; the fifth and sixth each tell their replica.
        assert locked_after[3] == [False, False] and locked_after[5] == [True, True], locked_after
        # Without the shared count, six failures alternating lock neither replica.
        alone = [SlidingWindowLimiter(4), SlidingWindowLimiter(4)]
        for i in range(6):
            await count_failure(alone[i % 2], address, None, door=door)
        assert [r.wait(address) for r in alone] == [None, None]
    finally:
        store.close()
