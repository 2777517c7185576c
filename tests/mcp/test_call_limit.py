"""The per-key rate limit over real streamable HTTP: it counts tool calls only, two servers on
one Postgres share a key's count, and on SQLite each server process counts its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from lore_mcp.embedding.embedder import Embedder
from stores import open_postgres_store
from tests.support.helpers import call
from tests.support.stores import open_store
from tests.support.team import http_client, team_server

REFUSED = "RATE_LIMITED: more than {limit} tool calls in a minute"


async def free_requests(client: Client) -> None:
    """Everything a client does besides tool calls: listings, a resource, the prompts."""
    assert (await client.list_tools()).tools
    assert (await client.list_resources()).resources
    assert (await client.read_resource("lore://stats")).contents
    assert (await client.list_prompts()).prompts


async def refused(client: Client, limit: int) -> str:
    with pytest.raises(MCPError) as err:
        await call(client, "list_lessons")
    assert str(err.value).startswith(REFUSED.format(limit=limit))
    return str(err.value)


async def test_a_run_with_five_tool_calls_spends_five(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder, rate_limit_per_minute=7) as server:
        key = server.keys.init_org("acme").key
        async with http_client(server.url, key) as client:  # the handshake is free
            for _ in range(5):
                await free_requests(client)
                await call(client, "list_lessons")
            await free_requests(client)
        # A second run of the same key (a new handshake, free too) has 2 of the 7 left.
        async with http_client(server.url, key) as client:
            await call(client, "list_lessons")
            await free_requests(client)
            await call(client, "list_lessons")
            await refused(client, 7)
            # Refused tool calls, but listings and resources still answer.
            await free_requests(client)
            await refused(client, 7)


@pytest.fixture
def two_postgres_stores(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """Two stores on one emptied Postgres database, each with its own connection pool, as two
    server processes would have."""
    first = open_store("postgres", tmp_path, request)
    second = open_postgres_store(request.getfixturevalue("postgres_url"))
    try:
        yield first, second
    finally:
        second.close()
        first.close()


async def test_two_servers_on_one_postgres_give_a_key_its_limit_once(
    two_postgres_stores: tuple[Any, Any], embedder: Embedder
) -> None:
    first, second = two_postgres_stores
    with (
        team_server(first, embedder, rate_limit_per_minute=4) as a,
        team_server(second, embedder, rate_limit_per_minute=4) as b,
    ):
        key = a.keys.init_org("acme").key
        async with http_client(a.url, key) as on_a, http_client(b.url, key) as on_b:
            for _ in range(2):  # alternating: 4 calls in all
                await call(on_a, "list_lessons")
                await call(on_b, "list_lessons")
            await refused(on_a, 4)
            await refused(on_b, 4)
            # Another key of the org has its own count on both.
            other = a.keys.create_key("acme", name="other", project=None, root=False).key
            async with http_client(b.url, other) as other_on_b:
                await call(other_on_b, "list_lessons")


async def test_on_sqlite_each_server_process_counts_its_own(tmp_path: Path, embedder: Embedder) -> None:
    from stores import open_local_store

    store = open_local_store(tmp_path / "lore.db")
    try:
        with (
            team_server(store, embedder, rate_limit_per_minute=2) as a,
            team_server(store, embedder, rate_limit_per_minute=2) as b,
        ):
            key = a.keys.init_org("acme").key
            async with http_client(a.url, key) as on_a, http_client(b.url, key) as on_b:
                await call(on_a, "list_lessons")
                await call(on_a, "list_lessons")
                await refused(on_a, 2)
                # The other app instance (another process, on SQLite) has counted nothing.
                await call(on_b, "list_lessons")
                await call(on_b, "list_lessons")
                await refused(on_b, 2)
    finally:
        store.close()
