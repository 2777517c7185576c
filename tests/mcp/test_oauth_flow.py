"""The whole OAuth flow as clients run it: the SDK's own OAuth client (``mcp.client.auth``), knowing
only the server's URL, discovers the metadata from the 401, registers (dynamically, or by a
client ID metadata document on a local HTTPS server), sends a person to the consent page,
and then saves and recalls, in both protocol eras, on both backends."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client

from lore_mcp.embedding.embedder import Embedder
from tests.support.helpers import call
from tests.support.oauth import (
    REDIRECT,
    MemoryTokens,
    Person,
    client_metadata,
    metadata_documents,
    oauth_server,
    pkce,
)

MODES = ["legacy", "2026-07-28"]


async def save_and_recall(url: str, auth: OAuthClientProvider, mode: str) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(auth=auth, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        saved = await call(
            client, "save_lesson", problem="oauth flow: redis evictions at peak", resolution="raise maxmemory"
        )
        recalled = await call(client, "recall_lessons", query="redis evictions")
        assert recalled["lessons"][0]["id"] == saved["id"]
        return saved


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_registers_dynamically_and_saves_and_recalls(
    store: Any, embedder: Embedder, mode: str
) -> None:
    with oauth_server(store, embedder) as lore:
        key = lore.keys.init_org("acme").key
        person, tokens = Person(key), MemoryTokens()
        auth = OAuthClientProvider(
            lore.url,
            client_metadata(),
            tokens,
            redirect_handler=person.redirect,
            callback_handler=person.callback,
        )
        saved = await save_and_recall(lore.url, auth, mode)
        assert person.pages == 1
        assert tokens.client.client_id and not tokens.client.client_id.startswith("https://")
        assert tokens.tokens.access_token.startswith("lore_at_")
        # The lesson is in the key's org: the key itself reads it.
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
            Client(streamable_http_client(lore.url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
        ):
            assert (await call(client, "get_lesson", id=saved["id"]))["id"] == saved["id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_known_by_its_metadata_document_saves_and_recalls(
    store: Any, embedder: Embedder, tmp_path: Path, mode: str
) -> None:
    document = {
        "client_id": "{base}/oauth/client.json",
        "client_name": "Metadata <b>document</b> client",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    with (
        metadata_documents(tmp_path, {"/oauth/client.json": document}) as (base, cert),
        oauth_server(store, embedder, trusted_ca=cert) as lore,
    ):
        key = lore.keys.init_org("acme").key
        person, tokens = Person(key), MemoryTokens()
        auth = OAuthClientProvider(
            lore.url,
            client_metadata(),
            tokens,
            redirect_handler=person.redirect,
            callback_handler=person.callback,
            client_metadata_url=f"{base}/oauth/client.json",
        )
        await save_and_recall(lore.url, auth, mode)
        assert tokens.client.client_id == f"{base}/oauth/client.json"
        assert person.pages == 1


async def test_the_client_refreshes_quietly_once_its_access_token_expires(
    store: Any, embedder: Embedder
) -> None:
    with oauth_server(store, embedder) as lore:
        key = lore.keys.init_org("acme").key
        person, tokens = Person(key), MemoryTokens()
        auth = OAuthClientProvider(
            lore.url,
            client_metadata(),
            tokens,
            redirect_handler=person.redirect,
            callback_handler=person.callback,
        )
        await save_and_recall(lore.url, auth, "legacy")
        first = tokens.tokens
        # Fifteen minutes later, as the client sees it: its access token has expired.
        auth.context.token_expiry_time = time.time() - 1
        await save_and_recall(lore.url, auth, "legacy")
        assert person.pages == 1, "no second consent: the refresh token was used"
        assert tokens.tokens.refresh_token != first.refresh_token, "refresh tokens rotate"
        assert tokens.tokens.access_token != first.access_token


def test_a_metadata_document_that_lies_or_is_too_big_is_refused_saying_why(
    store: Any, embedder: Embedder, tmp_path: Path
) -> None:
    honest = {"client_id": "{base}/ok.json", "client_name": "ok", "redirect_uris": [REDIRECT]}
    documents = {
        "/ok.json": honest,
        "/lies.json": {**honest, "client_id": "https://elsewhere.example/ok.json"},
        "/big.json": {**honest, "client_id": "{base}/big.json", "client_name": "x" * 6000},
        "/secret.json": {
            **honest,
            "client_id": "{base}/secret.json",
            "token_endpoint_auth_method": "client_secret_post",
        },
    }
    with (
        metadata_documents(tmp_path, documents) as (base, cert),
        oauth_server(store, embedder, trusted_ca=cert) as lore,
    ):
        _, challenge = pkce()

        def authorize(client_id: str, redirect: str = REDIRECT, method: str = "GET") -> httpx2.Response:
            query = {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect,
                "code_challenge": challenge,
                "state": "s",
            }
            if method == "POST":
                return httpx2.post(f"{lore.base}/authorize", data=query, timeout=30)
            return httpx2.get(f"{lore.base}/authorize", params=query, timeout=30)

        assert authorize(f"{base}/ok.json").status_code == 302
        assert authorize(f"{base}/ok.json", "http://127.0.0.1:9/elsewhere").status_code == 400
        reasons = {
            "lies": "its client_id is not the URL it was fetched from",
            "big": "it is larger than 5120 bytes",
            "secret": "only public clients",
            "missing": "it answered HTTP 404",
        }
        for name, reason in reasons.items():
            refused = authorize(f"{base}/{name}.json")
            assert refused.status_code == 400 and "location" not in refused.headers, name
            assert refused.json()["error"] == "invalid_request"
            described = refused.json()["error_description"]
            assert described.startswith(
                f"The client ID metadata document {base}/{name}.json is refused: {reason}"
            )
        assert authorize(f"{base}/ok.json", method="POST").status_code == 302
        posted = authorize(f"{base}/lies.json", method="POST").json()["error_description"]
        assert reasons["lies"] in posted
