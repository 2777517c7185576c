"""OAuth on the team server, request by request: the metadata, the 401, and every way a code,
token or redirect can be wrong (wrong PKCE verifier, reused code, expired token, a rotated
refresh token replayed, a revoked key, a foreign redirect URI, another resource, another
org's lessons), on both backends, over real HTTP."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lore_mcp.auth import secret_digest
from lore_mcp.embedding.embedder import Embedder
from stores.engine.oauth_rows import OAuthGrant, OAuthTokenRow
from tests.support.helpers import ToolFailed, call
from tests.support.oauth import OAuthServer, consent, oauth_server, pkce, redirect_params
from tests.support.team import http_client, raw_post

REDIRECT = "http://127.0.0.1:41234/callback"


@pytest.fixture
def lore(store: Any, embedder: Embedder) -> Iterator[OAuthServer]:
    with oauth_server(store, embedder) as server:
        yield server


def register(lore: OAuthServer, name: str = "Edge client", redirect: str = REDIRECT) -> str:
    response = httpx2.post(
        f"{lore.base}/register",
        json={"client_name": name, "redirect_uris": [redirect], "token_endpoint_auth_method": "none"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["client_id"])


def authorize_url(lore: OAuthServer, client_id: str, challenge: str, **extra: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st4te",
        "resource": lore.url,
        **extra,
    }
    return f"{lore.base}/authorize?{urlencode(params)}"


def code_for(lore: OAuthServer, client_id: str, key: str, **extra: str) -> tuple[str, str]:
    verifier, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        params = redirect_params(
            consent(browser, authorize_url(lore, client_id, challenge, **extra), key=key)
        )
    assert params["state"] == "st4te" and params["iss"] == lore.base
    return params["code"], verifier


def exchange(lore: OAuthServer, client_id: str, **form: str) -> httpx2.Response:
    return httpx2.post(f"{lore.base}/token", data={"client_id": client_id, **form}, timeout=30)


def tokens_for(lore: OAuthServer, client_id: str, key: str) -> dict[str, Any]:
    code, verifier = code_for(lore, client_id, key)
    response = exchange(
        lore,
        client_id,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        redirect_uri=REDIRECT,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def status_with(lore: OAuthServer, token: str) -> int:
    return raw_post(lore.url, f"Bearer {token}").status_code


def test_the_metadata_names_the_resource_its_server_and_what_it_supports(lore: OAuthServer) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        resource = httpx2.get(lore.base + path, timeout=30).json()
        assert resource["resource"] == lore.url and resource["authorization_servers"] == [lore.base]
    server = httpx2.get(f"{lore.base}/.well-known/oauth-authorization-server", timeout=30).json()
    assert server["issuer"] == lore.base
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["authorization_response_iss_parameter_supported"] is True
    assert server["client_id_metadata_document_supported"] is True
    assert server["registration_endpoint"] == f"{lore.base}/register"
    assert "none" in server["token_endpoint_auth_methods_supported"]


def test_every_401_names_the_metadata_and_says_what_to_send(lore: OAuthServer) -> None:
    for header in (None, "Bearer lore_sk_short", "Bearer lore_at_unknown", "Basic x"):
        response = raw_post(lore.url, header)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{lore.base}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert 'error="invalid_token"' in challenge and 'error_description="UNAUTHORIZED: ' in challenge
        error = response.json()["error"]
        description = error["message"]
        assert description.startswith("UNAUTHORIZED: ") and "Authorization" in description
        assert "lore_sk_" in description and "README" in description
        assert f'error_description="{description}"' in challenge
        assert error["data"] == {
            "error": "invalid_token",
            "resource_metadata": f"{lore.base}/.well-known/oauth-protected-resource/mcp",
        }


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_python_sdk_client_shows_the_sentence(lore: OAuthServer, mode: str) -> None:
    with pytest.raises(BaseException) as refused:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer lore_sk_" + "A" * 32}, timeout=30) as http,
            Client(streamable_http_client(lore.url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
        ):
            await client.list_tools()
    errors = [refused.value]
    while errors and isinstance(errors[0], BaseExceptionGroup):
        errors = list(errors[0].exceptions)
    assert isinstance(errors[0], MCPError), refused.value
    assert errors[0].error.message.startswith("UNAUTHORIZED: This request needs the header Authorization")


def test_a_token_works_until_its_key_is_revoked(lore: OAuthServer) -> None:
    root = lore.keys.init_org("acme").key
    bob = lore.keys.create_key("acme", name="bob", project=None, root=False)
    client_id = register(lore)
    tokens = tokens_for(lore, client_id, bob.key)
    assert status_with(lore, tokens["access_token"]) == 200
    assert status_with(lore, root) == 200, "API keys keep working beside OAuth"
    lore.keys.revoke_key("acme", bob.id)
    assert status_with(lore, tokens["access_token"]) == 401
    refreshed = exchange(lore, client_id, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"


def test_a_wrong_pkce_verifier_and_a_reused_code_are_refused(lore: OAuthServer) -> None:
    key = lore.keys.init_org("acme").key
    client_id = register(lore)
    code, verifier = code_for(lore, client_id, key)
    wrong = exchange(
        lore,
        client_id,
        grant_type="authorization_code",
        code=code,
        code_verifier="x" * 50,
        redirect_uri=REDIRECT,
    )
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    first = exchange(
        lore,
        client_id,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        redirect_uri=REDIRECT,
    )
    assert first.status_code == 200
    again = exchange(
        lore,
        client_id,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        redirect_uri=REDIRECT,
    )
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    # A replayed code revokes what it gave (RFC 9700 §4.2.4).
    assert status_with(lore, first.json()["access_token"]) == 401


def test_a_refresh_token_rotates_and_a_replay_revokes_the_family(lore: OAuthServer) -> None:
    key = lore.keys.init_org("acme").key
    client_id = register(lore)
    tokens = tokens_for(lore, client_id, key)
    rotated = exchange(lore, client_id, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert rotated.status_code == 200
    fresh = rotated.json()
    assert (
        fresh["refresh_token"] != tokens["refresh_token"] and status_with(lore, fresh["access_token"]) == 200
    )
    replay = exchange(lore, client_id, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert status_with(lore, fresh["access_token"]) == 401
    later = exchange(lore, client_id, grant_type="refresh_token", refresh_token=fresh["refresh_token"])
    assert later.status_code == 400


def test_an_expired_token_and_one_for_another_resource_are_refused(lore: OAuthServer, store: Any) -> None:
    key = lore.keys.init_org("acme")
    grant = OAuthGrant(client_id="c", org="acme", key_id=key.id, project=None, resource=lore.url, scopes=())
    past = datetime.now(UTC) - timedelta(seconds=1)
    soon = datetime.now(UTC) + timedelta(minutes=5)
    store.keys.oauth.add_token(
        secret_digest("lore_at_expired"), OAuthTokenRow("access", "f", grant, past, False)
    )
    assert status_with(lore, "lore_at_expired") == 401
    other = OAuthGrant(**{**grant.__dict__, "resource": "https://elsewhere.example/mcp"})
    store.keys.oauth.add_token(
        secret_digest("lore_at_elsewhere"), OAuthTokenRow("access", "f", other, soon, False)
    )
    assert status_with(lore, "lore_at_elsewhere") == 401
    store.keys.oauth.add_token(
        secret_digest("lore_at_here"), OAuthTokenRow("access", "f", grant, soon, False)
    )
    assert status_with(lore, "lore_at_here") == 200
    # Asking for another resource is refused at the authorization step, back at the client.
    client_id = register(lore)
    _, challenge = pkce()
    refused = httpx2.get(
        authorize_url(lore, client_id, challenge, resource="https://elsewhere.example/mcp"), timeout=30
    )
    assert redirect_params(refused)["error"] == "invalid_target"


def test_a_foreign_redirect_uri_is_refused_and_loopback_ports_may_differ(lore: OAuthServer) -> None:
    client_id = register(lore, redirect="http://127.0.0.1/callback")
    _, challenge = pkce()
    for foreign in ("https://attacker.example/callback", "http://127.0.0.1:5555/other"):
        response = httpx2.get(authorize_url(lore, client_id, challenge, redirect_uri=foreign), timeout=30)
        assert response.status_code == 400 and "location" not in response.headers
        assert response.json()["error"] == "invalid_request"
    moved = httpx2.get(
        authorize_url(lore, client_id, challenge, redirect_uri="http://127.0.0.1:5555/callback"), timeout=30
    )
    assert moved.status_code == 302 and moved.headers["location"].startswith(f"{lore.base}/oauth/consent?")
    bad = httpx2.post(
        f"{lore.base}/register",
        json={"redirect_uris": ["http://attacker.example/cb"], "token_endpoint_auth_method": "none"},
        timeout=30,
    )
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_redirect_uri"


def test_denying_goes_back_with_access_denied(lore: OAuthServer) -> None:
    key = lore.keys.init_org("acme").key
    client_id = register(lore)
    _, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        answer = consent(browser, authorize_url(lore, client_id, challenge), key=key, decision="deny")
    params = redirect_params(answer)
    assert params == {
        "error": "access_denied",
        "error_description": params["error_description"],
        "state": "st4te",
        "iss": lore.base,
    }


def test_the_page_escapes_the_client_name_and_refuses_forged_posts(lore: OAuthServer) -> None:
    key = lore.keys.init_org("acme").key
    client_id = register(lore, name="<script>alert(1)</script>")
    _, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        page = browser.get(authorize_url(lore, client_id, challenge), follow_redirects=True)
        assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert "127.0.0.1" in page.text and page.headers["x-frame-options"] == "DENY"
        signed = page.url.params["request"]
        forged = {"request": signed, "csrf": "guess", "api_key": key, "decision": "approve"}
        assert browser.post(f"{lore.base}/oauth/consent", data=forged).status_code == 403
    # Another site posting with no CSRF cookie, or from another origin, gets nothing either.
    assert httpx2.post(f"{lore.base}/oauth/consent", data=forged, timeout=30).status_code == 403


def test_a_wrong_key_on_the_page_says_so_and_issues_nothing(lore: OAuthServer) -> None:
    lore.keys.init_org("acme")
    client_id = register(lore)
    _, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        answer = consent(browser, authorize_url(lore, client_id, challenge), key="lore_sk_" + "Z" * 32)
    assert answer.status_code == 401 and "does not know that API key" in answer.text


def test_a_project_key_grants_only_its_project(lore: OAuthServer) -> None:
    lore.keys.init_org("acme")
    alice = lore.keys.create_key("acme", name="alice", project="alpha", root=False).key
    client_id = register(lore)
    _, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        answer = consent(browser, authorize_url(lore, client_id, challenge), key=alice, project="beta")
    assert answer.status_code == 400 and "reaches only project alpha" in answer.text


def test_no_key_code_or_token_reaches_the_log(lore: OAuthServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = lore.keys.init_org("acme").key
    client_id = register(lore)
    code, verifier = code_for(lore, client_id, key)
    tokens = exchange(
        lore,
        client_id,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        redirect_uri=REDIRECT,
    ).json()
    exchange(lore, client_id, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    status_with(lore, tokens["access_token"])
    # The server's logs (the test's own HTTP client traces what it sent and got, at DEBUG).
    server_side = [r for r in caplog.records if not r.name.startswith(("httpx2", "httpcore2"))]
    logged = "\n".join(record.getMessage() for record in server_side)
    for secret in (key, code, verifier, tokens["access_token"], tokens["refresh_token"]):
        assert secret not in logged


async def test_a_token_of_one_org_never_reaches_another_orgs_lessons(lore: OAuthServer) -> None:
    acme = lore.keys.init_org("acme").key
    globex = lore.keys.init_org("globex").key
    async with http_client(lore.url, globex) as theirs:
        secret = await call(
            theirs, "save_lesson", problem="globex payroll export quirk", resolution="retry at 2am"
        )
    tokens = tokens_for(lore, register(lore), acme)
    async with http_client(lore.url, tokens["access_token"]) as ours:
        for tool, args in [
            ("get_lesson", {"id": secret["id"]}),
            ("update_lesson", {"id": secret["id"], "resolution": "changed"}),
            ("delete_lesson", {"id": secret["id"]}),
            ("upvote_lesson", {"id": secret["id"]}),
        ]:
            with pytest.raises(ToolFailed) as refused:
                await call(ours, tool, **args)
            assert refused.value.code == "NOT_FOUND", tool
        assert (await call(ours, "recall_lessons", query="payroll export quirk"))["lessons"] == []
        # A connector is never a root caller: the key tools are not listed to it.
        assert "create_key" not in {tool.name for tool in (await ours.list_tools()).tools}
    async with http_client(lore.url, globex) as theirs:
        assert (await call(theirs, "get_lesson", id=secret["id"]))["resolution"] == "retry at 2am"
