"""The client side of Lore's OAuth, as a connector and the person at its browser play it: the
metadata a client registers, PKCE, a person answering the consent page, the SDK client's handlers
and token storage, and a whole flow that ends in an access token.

Apart from ``tests.support.oauth`` (the servers, and the certificate that needs ``cryptography``)
so that ``benchmarks/load.py`` can get a real access token with the same code the tests use.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import re
import secrets
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from pydantic import AnyUrl

REDIRECT = "http://127.0.0.1:33418/callback"


def client_metadata() -> OAuthClientMetadata:
    """What the SDK client registers: a public client with one loopback redirect URI."""
    return OAuthClientMetadata(
        client_name="Flow <test> client",
        redirect_uris=[AnyUrl(REDIRECT)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


def pkce() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636 §4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def form_fields(page: str) -> dict[str, str]:
    """The hidden fields of the consent form."""
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page)
    }


def consent(
    browser: httpx2.Client, authorize_url: str, *, key: str, decision: str = "approve", project: str = ""
) -> httpx2.Response:
    """A person following ``authorize_url`` to the consent page and answering it; the answer's
    redirect (not followed)."""
    page = browser.get(authorize_url, follow_redirects=True)
    assert page.status_code == 200, page.text
    fields = form_fields(page.text)
    answer = browser.post(
        str(page.url).split("?")[0],
        data={**fields, "api_key": key, "decision": decision, "project": project},
        follow_redirects=False,
    )
    return answer


def redirect_params(response: httpx2.Response) -> dict[str, str]:
    assert response.status_code in (302, 303), response.text
    return {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}


class Person:
    """The SDK client's redirect and callback handlers, played by a person with one key."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.result: dict[str, str] = {}
        self.pages = 0

    async def redirect(self, authorize_url: str) -> None:
        def answer() -> dict[str, str]:
            with httpx2.Client(timeout=30) as browser:
                return redirect_params(consent(browser, authorize_url, key=self.key))

        self.pages += 1
        self.result = await asyncio.to_thread(answer)

    async def callback(self) -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        return AuthorizationCodeResult(
            code=self.result["code"], state=self.result.get("state"), iss=self.result.get("iss")
        )


class MemoryTokens:
    """The SDK client's ``TokenStorage``, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


async def access_token(url: str, key: str) -> str:
    """An access token for the MCP endpoint ``url`` through the whole flow a connector runs:
    discovery from the 401, dynamic registration, the consent page approved with ``key``,
    the code exchanged with PKCE; then one tools/list with it, so the token is known to work."""
    person, tokens = Person(key), MemoryTokens()
    auth = OAuthClientProvider(
        url, client_metadata(), tokens, redirect_handler=person.redirect, callback_handler=person.callback
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,  # type: ignore[arg-type]
    ):
        await client.list_tools()
    assert person.pages == 1 and tokens.tokens is not None
    return str(tokens.tokens.access_token)
