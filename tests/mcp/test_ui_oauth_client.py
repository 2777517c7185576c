"""The page for people as an OAuth client, request by request over real HTTP: the server knows it
without registering (no row per sign-in), serves its metadata document, sends it only back to
the page's own address (a foreign redirect URI, another loopback port included, is refused and
never redirected to), and its code, refresh and revocation work as a public client's, on both
backends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.transport.oauth.clients import PAGE_CLIENT_PATH
from tests.support.oauth import OAuthServer, consent, oauth_server, pkce, redirect_params
from tests.support.team import free_port, raw_post


@pytest.fixture
def lore(store: Any, embedder: Embedder) -> Iterator[OAuthServer]:
    with oauth_server(store, embedder) as server:
        yield server


def page_of(lore: OAuthServer) -> tuple[str, str]:
    """The page's client id and its one redirect URI."""
    return lore.base + PAGE_CLIENT_PATH, lore.base + "/ui/"


def authorize(lore: OAuthServer, redirect: str | None, challenge: str = "x" * 43) -> httpx2.Response:
    client_id, _ = page_of(lore)
    params = {
        "response_type": "code",
        "client_id": client_id,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "page-state",
        "resource": lore.url,
    }
    if redirect is not None:
        params["redirect_uri"] = redirect
    return httpx2.get(f"{lore.base}/authorize?{urlencode(params)}", timeout=30, follow_redirects=False)


def test_the_page_client_is_known_without_registering_and_its_document_is_served(lore: OAuthServer) -> None:
    client_id, redirect = page_of(lore)
    document = httpx2.get(client_id, timeout=30)
    assert document.status_code == 200
    assert document.json() == {
        "client_id": client_id,
        "client_name": "Lore's page for people",
        "client_uri": redirect,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    started = authorize(lore, redirect)
    assert started.status_code == 302 and started.headers["location"].startswith(
        f"{lore.base}/oauth/consent?"
    )


@pytest.mark.parametrize(
    "foreign",
    [
        "https://evil.example/ui/",
        "http://127.0.0.1:{other}/ui/",
        "http://localhost:{port}/ui/",
        "{base}/ui/?next=https://evil.example/",
        "{base}/ui/elsewhere",
        "{base}/ui",
    ],
)
def test_the_page_client_refuses_a_redirect_uri_other_than_the_page(lore: OAuthServer, foreign: str) -> None:
    port = lore.base.rsplit(":", 1)[1]
    uri = foreign.format(base=lore.base, port=port, other=free_port())
    refused = authorize(lore, uri)
    assert refused.status_code == 400, refused.headers
    assert "location" not in refused.headers, "a refused redirect URI is never redirected to"
    body = refused.json()
    assert body["error"] == "invalid_request"
    assert "Lore's page returns only to" in body["error_description"]


def test_the_page_signs_in_refreshes_and_revokes_as_a_public_client(lore: OAuthServer) -> None:
    key = lore.keys.init_org("acme").key
    client_id, redirect = page_of(lore)
    verifier, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        answer = redirect_params(consent(browser, str(authorize(lore, redirect, challenge).url), key=key))
    assert answer["state"] == "page-state" and answer["iss"] == lore.base
    token = f"{lore.base}/token"
    form = {"client_id": client_id, "resource": lore.url}
    tokens = httpx2.post(
        token,
        data={**form, "grant_type": "authorization_code", "code": answer["code"], "code_verifier": verifier,
              "redirect_uri": redirect},
        timeout=30,
    )  # fmt: skip
    assert tokens.status_code == 200, tokens.text
    first = tokens.json()
    assert raw_post(lore.url, f"Bearer {first['access_token']}").status_code == 200
    refreshed = httpx2.post(
        token,
        data={**form, "grant_type": "refresh_token", "refresh_token": first["refresh_token"]},
        timeout=30,
    )
    assert refreshed.status_code == 200, refreshed.text
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    revoked = httpx2.post(
        f"{lore.base}/revoke", data={"client_id": client_id, "token": second["refresh_token"]}, timeout=30
    )
    assert revoked.status_code == 200, revoked.text
    assert raw_post(lore.url, f"Bearer {second['access_token']}").status_code == 401
    assert lore.keys.keys.oauth.client(client_id) is None, "no client row was written"


def test_revoking_still_needs_a_confidential_clients_secret(lore: OAuthServer) -> None:
    registered = httpx2.post(
        f"{lore.base}/register",
        json={"client_name": "Confidential", "redirect_uris": ["https://app.example/cb"],
              "token_endpoint_auth_method": "client_secret_post"},
        timeout=30,
    ).json()  # fmt: skip
    assert registered["client_secret"]
    form = {"client_id": registered["client_id"], "token": "lore_rt_unknown"}
    assert httpx2.post(f"{lore.base}/revoke", data=form, timeout=30).status_code == 401
    with_secret = {**form, "client_secret": registered["client_secret"]}
    assert httpx2.post(f"{lore.base}/revoke", data=with_secret, timeout=30).status_code == 200
    client_id, _ = page_of(lore)
    missing = httpx2.post(f"{lore.base}/revoke", data={"client_id": client_id}, timeout=30)
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


def test_a_token_the_page_holds_makes_its_caller_a_person(lore: OAuthServer, store: Any) -> None:
    """Issue 35: a person on the page is known by the credential (a token issued to the page's own
    client), not by a name a client chooses: their recall is logged as a person's and counts as no
    agent's recall, while the same key used by an agent counts."""
    import anyio

    from stores import Scope
    from stores.engine.activity import ActivityQuery
    from tests.support.helpers import call
    from tests.support.team import http_client

    key = lore.keys.init_org("acme").key
    client_id, redirect = page_of(lore)
    verifier, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        answer = redirect_params(consent(browser, str(authorize(lore, redirect, challenge).url), key=key))
    tokens = httpx2.post(
        f"{lore.base}/token",
        data={"client_id": client_id, "resource": lore.url, "grant_type": "authorization_code",
              "code": answer["code"], "code_verifier": verifier, "redirect_uri": redirect},
        timeout=30,
    ).json()  # fmt: skip

    async def visit() -> str:
        async with http_client(lore.url, tokens["access_token"]) as page:
            saved = await call(page, "save_lesson", problem="Flaky DNS in CI", resolution="Pin resolv.conf")
            await call(page, "recall_lessons", query="flaky dns")
        async with http_client(lore.url, key) as agent:
            await call(agent, "recall_lessons", query="flaky dns")
        return str(saved["id"])

    lesson_id = anyio.run(visit)
    scope = Scope(org="acme", project="default")
    recalls = store.activity(scope, ActivityQuery(kinds=("recall",))).entries
    assert [entry.note.person for entry in recalls] == [False, True], (
        "newest first: the agent's, then the page's"
    )
    assert store.recall_stats(scope, [lesson_id])[lesson_id].count == 1
