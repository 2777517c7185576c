"""OAuth against the team server as people run it: `lore-memory mcp --transport http` in a process
of its own. The SDK's OAuth client, knowing only the URL, gets through the consent page to a
saved and recalled lesson; revoking the key from the CLI ends the token; the server's log holds
no key, code or token; a --public-url that cannot be one is refused at start."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client

from tests.support.helpers import call
from tests.support.oauth import MemoryTokens, Person, client_metadata
from tests.support.processes import lore, lore_env, lore_http
from tests.support.team import raw_post


async def test_a_client_connects_through_oauth_and_loses_access_when_the_key_is_revoked(
    tmp_path: Path,
) -> None:
    env = lore_env(tmp_path / "team.db")
    assert lore(env, "init", "--json").returncode == 0
    laptop = json.loads(lore(env, "keys", "create", "--name", "laptop", "--json").stdout)
    log = tmp_path / "server.log"
    with lore_http(env, log) as url:
        person, tokens = Person(laptop["key"]), MemoryTokens()
        auth = OAuthClientProvider(
            url, client_metadata(), tokens, redirect_handler=person.redirect, callback_handler=person.callback
        )
        async with (
            httpx2.AsyncClient(auth=auth, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,  # type: ignore[arg-type]
        ):
            saved = await call(
                client, "save_lesson", problem="process oauth: flaky dns", resolution="pin resolver"
            )
            recalled = await call(client, "recall_lessons", query="flaky dns")
            assert recalled["lessons"][0]["id"] == saved["id"]
        access = tokens.tokens.access_token
        assert raw_post(url, f"Bearer {access}").status_code == 200
        assert lore(env, "keys", "revoke", laptop["id"]).returncode == 0
        assert raw_post(url, f"Bearer {access}").status_code == 401
    written = log.read_text()
    assert "OAuth for connectors (claude.ai, Claude Desktop) at http://127.0.0.1:" in written
    for secret in (laptop["key"], access, tokens.tokens.refresh_token, person.result["code"]):
        assert secret not in written


def test_a_public_url_with_a_path_is_refused_at_start(tmp_path: Path) -> None:
    env = lore_env(tmp_path / "team.db")
    started = lore(env, "mcp", "--transport", "http", "--public-url", "https://lore.example.com/team")
    assert started.returncode == 2
    assert "--public-url must be the base URL" in started.stderr


def test_oauth_registration_key_asks_register_for_an_api_key(tmp_path: Path) -> None:
    env = lore_env(tmp_path / "team.db")
    assert lore(env, "init", "--json").returncode == 0
    key = json.loads(lore(env, "keys", "create", "--name", "admin", "--json").stdout)["key"]
    body = {"client_name": "Pre-registered", "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"]}
    with lore_http({**env, "LORE_OAUTH_REGISTRATION": "key"}, tmp_path / "server.log") as url:
        register = url.removesuffix("/mcp") + "/register"
        refused = httpx2.post(register, json=body, timeout=30)
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"
        made = httpx2.post(register, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert made.status_code == 201 and made.json()["client_name"] == "Pre-registered"
