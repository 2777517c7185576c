"""Two real team-server processes (``lore-memory mcp --transport http``) on one Postgres: a
client alternating between them gets its key's limit of tool calls once, not twice, and its
handshakes and listings on both spend nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from lore_mcp.services.keys import KeyService
from tests.support.helpers import call
from tests.support.processes import lore_http, server_env
from tests.support.stores import open_store
from tests.support.team import http_client

LIMIT = 3


async def test_two_server_processes_on_one_postgres_share_a_keys_limit(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_store("postgres", tmp_path, request)  # an emptied database
    try:
        key = KeyService(store.keys).init_org("acme").key
    finally:
        store.close()
    env = server_env(
        tmp_path / "unused.db",
        LORE_STORE="postgres",
        LORE_DATABASE_URL=request.getfixturevalue("postgres_url"),
        LORE_RATE_LIMIT_PER_MINUTE=str(LIMIT),
    )
    with lore_http(env, tmp_path / "a.log") as a, lore_http(env, tmp_path / "b.log") as b:
        async with http_client(a, key) as on_a, http_client(b, key) as on_b:
            for client in (on_a, on_b, on_a):
                assert (await client.list_tools()).tools
                await call(client, "list_lessons")
            for client in (on_b, on_a):
                with pytest.raises(MCPError, match=f"^RATE_LIMITED: more than {LIMIT} tool calls"):
                    await call(client, "list_lessons")
                assert (await client.list_tools()).tools  # listings stay free
