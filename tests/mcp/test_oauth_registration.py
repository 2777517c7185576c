"""``/register`` and the redirects it allows, over real HTTP on both backends: what real clients
send registers; a field, a list or a body over its limit, a scheme a browser would run itself, a
burst from one address (across replicas on Postgres) and unused clients past the cap per address
are refused with RFC 7591 error JSON, changing nothing; ``LORE_OAUTH_REGISTRATION=key`` asks for
an API key. Beside it: the PKCE challenge's form (RFC 7636) and ``resource`` at ``/token``
(RFC 8707)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from lore_mcp.auth import secret_digest
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.transport.oauth import provider, routes
from tests.mcp.test_oauth_edges import REDIRECT, authorize_url, code_for, exchange, register, tokens_for
from tests.support.oauth import OAuthServer, consent, metadata_documents, oauth_server, pkce, redirect_params

# What real clients send (their registration bodies, trimmed of nothing that counts).
REAL_CLIENTS = {
    "claude.ai": {
        "client_name": "Claude",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    },
    "Cursor": {
        "client_name": "Cursor",
        "redirect_uris": [
            "cursor://anysphere.cursor-mcp/oauth/callback",
            "https://www.cursor.com/agents/mcp/oauth/callback",
            "http://localhost:8787/callback",
        ],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    },
    "MCP Inspector": {
        "client_name": "MCP Inspector",
        "client_uri": "https://github.com/modelcontextprotocol/inspector",
        "redirect_uris": [
            "http://localhost:6274/oauth/callback",
            "http://localhost:6274/oauth/callback/debug",
        ],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": "",
    },
    "Claude Desktop (native)": {
        "client_name": "Claude Desktop",
        "redirect_uris": ["http://127.0.0.1:54321/callback", "com.anthropic.claude:/oauth/callback"],
        "token_endpoint_auth_method": "none",
    },
}


@pytest.fixture
def lore(store: Any, embedder: Embedder) -> Iterator[OAuthServer]:
    with oauth_server(store, embedder) as server:
        yield server


def post(lore: OAuthServer, body: Any, **headers: str) -> httpx2.Response:
    return httpx2.post(f"{lore.base}/register", json=body, headers=headers, timeout=30)


def client(**fields: Any) -> dict[str, Any]:
    return {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **fields}


def test_what_real_clients_send_registers(lore: OAuthServer) -> None:
    for name, body in REAL_CLIENTS.items():
        response = post(lore, body)
        assert response.status_code == 201, (name, response.text)


@pytest.mark.parametrize(
    ("body", "error", "says"),
    [
        (
            client(client_name="x" * 201),
            "invalid_client_metadata",
            "client_name is longer than 200 characters",
        ),
        (client(client_name="x" * 900_000), "invalid_client_metadata", "16384 bytes"),
        (client(redirect_uris=[REDIRECT] * 11), "invalid_redirect_uri", "at most 10 redirect URIs"),
        (client(redirect_uris=[f"{REDIRECT}/{n}" for n in range(2000)]), "invalid_client_metadata", "16384"),
        (client(redirect_uris=[REDIRECT + "x" * 2000]), "invalid_client_metadata", "longer than 2000"),
        (client(contacts=["a@example.com"] * 11), "invalid_client_metadata", "contacts has more than 10"),
        (client(scope="s" * 2001), "invalid_client_metadata", "scope is longer than 2000"),
        (client(software_id="s" * 2001), "invalid_client_metadata", "software_id is longer"),
        (client(jwks={"keys": [{"n": "x" * 2001}]}), "invalid_client_metadata", "jwks holds a value that is"),
    ],
)
def test_a_field_list_or_body_over_its_limit_is_refused(
    lore: OAuthServer, store: Any, body: dict[str, Any], error: str, says: str
) -> None:
    response = post(lore, body)
    assert response.status_code in (400, 413), response.text
    assert response.json()["error"] == error and says in response.json()["error_description"]
    assert registered_nothing(store), "a refused registration stores nothing"


def registered_nothing(store: Any, address: str = "127.0.0.1") -> bool:
    """Whether ``address`` holds no unused client: a cap of one then still lets one in."""
    probe = {"client_id": "probe", "redirect_uris": [REDIRECT]}
    return (
        store.keys.oauth.register_client("probe", probe, address, datetime.now(UTC), 1, timedelta(hours=1))
        is None
    )


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(document.domain)",
        "JavaScript://example.com/%0aalert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "vbscript:msgbox(1)",
        "blob:https://example.com/0f1e",
        "about:blank",
        "ftp://example.com/cb",
        "ws://127.0.0.1/cb",
        "mailto:someone@example.com",
        "http://example.com/cb",
        "https://example.com/cb#fragment",
        "myapp:/callback",
    ],
)
def test_a_redirect_uri_outside_the_allowed_kinds_is_refused(lore: OAuthServer, uri: str) -> None:
    response = post(lore, client(redirect_uris=[uri]))
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_redirect_uri"
    assert "use https, http on a loopback address" in response.json()["error_description"]


def test_a_stored_client_with_a_script_redirect_is_never_sent_there(lore: OAuthServer, store: Any) -> None:
    """A client stored before the rule (or by hand) keeps its row, but /authorize answers 400
    itself rather than redirecting to the script, for its errors too."""
    store.keys.oauth.save_client(
        "old-client",
        {
            "client_id": "old-client",
            "redirect_uris": ["javascript:alert(1)"],
            "token_endpoint_auth_method": "none",
        },
    )
    _, challenge = pkce()
    for extra in ({}, {"resource": "https://elsewhere.example/mcp"}, {"code_challenge": "short"}):
        url = authorize_url(lore, "old-client", challenge, redirect_uri="javascript:alert(1)", **extra)
        response = httpx2.get(url, timeout=30)
        assert response.status_code == 400 and "location" not in response.headers, extra


def test_a_metadata_document_with_a_script_redirect_is_refused(
    store: Any, embedder: Embedder, tmp_path: Path
) -> None:
    documents = {
        f"/{name}.json": {"client_id": f"{{base}}/{name}.json", "client_name": name, "redirect_uris": [uri]}
        for name, uri in [("js", "javascript:alert(1)"), ("data", "data:text/html,x"), ("ok", REDIRECT)]
    }
    with (
        metadata_documents(tmp_path, documents) as (base, cert),
        oauth_server(store, embedder, trusted_ca=cert) as lore,
    ):
        _, challenge = pkce()
        for name, uri in [("js", "javascript:alert(1)"), ("data", "data:text/html,x")]:
            url = authorize_url(lore, f"{base}/{name}.json", challenge, redirect_uri=uri)
            response = httpx2.get(url, timeout=30)
            assert response.status_code == 400 and "location" not in response.headers, name
        ok = httpx2.get(authorize_url(lore, f"{base}/ok.json", challenge), timeout=30)
        assert ok.status_code == 302 and ok.headers["location"].startswith(f"{lore.base}/oauth/consent?")


def test_a_burst_from_one_address_gets_429_with_retry_after(lore: OAuthServer) -> None:
    for _ in range(routes.REGISTRATIONS_PER_MINUTE):
        assert post(lore, client()).status_code == 201
    refused = post(lore, client())
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.json()["error"] == "temporarily_unavailable"
    assert "registrations a minute came from your address" in refused.json()["error_description"]


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_the_rate_holds_across_replicas_on_postgres(store: Any, embedder: Embedder) -> None:
    limit = routes.REGISTRATIONS_PER_MINUTE
    with oauth_server(store, embedder) as one, oauth_server(store, embedder) as two:
        answers = [post((one, two)[n % 2], client()).status_code for n in range(2 * limit)]
    # Each replica counts in the database: the limit, plus one per replica that learns of it
    # late (as for failed logins), never twice the limit.
    assert answers.count(201) == limit + 2 and answers[-2:] == [429, 429]


def test_unused_clients_are_capped_per_address_until_one_is_used(
    lore: OAuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provider, "UNUSED_CLIENTS_PER_ADDRESS", 2)
    key = lore.keys.init_org("acme").key
    first = register(lore)
    register(lore)
    crowded = post(lore, client())
    assert crowded.status_code == 429 and crowded.json()["error"] == "temporarily_unavailable"
    assert 23 * 3600 < int(crowded.headers["retry-after"]) <= 24 * 3600
    assert "too many clients that nobody has signed in with yet" in crowded.json()["error_description"]
    tokens_for(lore, first, key)  # a person approved the first: it no longer counts
    assert post(lore, client()).status_code == 201


def test_an_api_key_is_asked_for_when_registration_needs_one(store: Any, embedder: Embedder) -> None:
    with oauth_server(store, embedder, registration="key") as lore:
        key = lore.keys.init_org("acme").key
        other = lore.keys.create_key("acme", name="gone", project=None, root=False)
        lore.keys.revoke_key("acme", other.id)
        for header in (
            {},
            {"Authorization": "Bearer lore_sk_" + "Z" * 32},
            {"Authorization": f"Bearer {other.key}"},
        ):
            refused = post(lore, client(), **header)
            assert refused.status_code == 401 and refused.json()["error"] == "invalid_token", header
            assert refused.headers["www-authenticate"] == 'Bearer error="invalid_token"'
            assert "Lore API key" in refused.json()["error_description"]
        assert post(lore, client(), Authorization=f"Bearer {key}").status_code == 201


@pytest.mark.parametrize("challenge", ["abcde", "A" * 42, "A" * 129, "A" * 42 + "+", "A" * 42 + "="])
def test_a_code_challenge_not_of_rfc_7636s_form_is_refused(lore: OAuthServer, challenge: str) -> None:
    client_id = register(lore)
    answer = httpx2.get(authorize_url(lore, client_id, challenge), timeout=30)
    assert redirect_params(answer)["error"] == "invalid_request"
    assert "code_challenge must be 43 to 128" in redirect_params(answer)["error_description"]


def test_a_token_request_for_another_resource_is_refused_with_invalid_target(lore: OAuthServer) -> None:
    key = lore.keys.init_org("acme").key
    client_id = register(lore)
    code, verifier = code_for(lore, client_id, key)
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": REDIRECT,
    }
    elsewhere = exchange(lore, client_id, resource="https://elsewhere.example/mcp", **form)
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target"
    tokens = exchange(lore, client_id, resource=lore.url, **form)
    assert tokens.status_code == 200, tokens.text
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens.json()["refresh_token"]}
    assert exchange(lore, client_id, resource="https://elsewhere.example/mcp", **refresh).json()["error"] == (
        "invalid_target"
    )
    assert exchange(lore, client_id, **refresh).status_code == 200


def test_the_metadata_says_public_clients_may_revoke(lore: OAuthServer) -> None:
    server = httpx2.get(f"{lore.base}/.well-known/oauth-authorization-server", timeout=30).json()
    assert "none" in server["revocation_endpoint_auth_methods_supported"]


def test_an_authorization_without_resource_is_bound_to_this_server(lore: OAuthServer, store: Any) -> None:
    """RFC 8707 leaves ``resource`` optional and the SDK's client sends it only once it has read
    the resource metadata, so /authorize goes on without it; the grant is this server's /mcp."""
    key = lore.keys.init_org("acme").key
    client_id = register(lore)
    verifier, challenge = pkce()
    url = authorize_url(lore, client_id, challenge).replace("&resource=", "&not_resource=")
    with httpx2.Client(timeout=30) as browser:
        code = redirect_params(consent(browser, url, key=key))["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": REDIRECT,
    }
    access = exchange(lore, client_id, **form).json()["access_token"]
    assert store.keys.oauth.token(secret_digest(access)).grant.resource == lore.url
