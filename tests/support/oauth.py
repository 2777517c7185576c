"""A team server with OAuth for tests, a person who answers its consent page, and a local HTTPS
server for client ID metadata documents (its self-signed certificate trusted by the test).

The server is the one ``lore-memory mcp --transport http`` serves on a loopback address
(``lore_mcp.transport.oauth.routes.team_auth``, ``lore_mcp.transport.http.build_app``),
under uvicorn in a thread, so clients speak real HTTP to it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import html
import ipaddress
import json
import re
import secrets
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.shared.auth import OAuthClientMetadata
from pydantic import AnyUrl
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.http import build_app, server_config
from lore_mcp.transport.oauth.clients import MetadataDocuments
from lore_mcp.transport.oauth.routes import team_auth
from tests.support.team import free_port

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


@dataclass
class OAuthServer:
    base: str  # the issuer
    url: str  # the /mcp resource
    keys: KeyService


def serve_in_thread(app: Any, port: int, **config: Any) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "a test HTTP server did not start"
        time.sleep(0.02)
    return server


@contextlib.contextmanager
def oauth_server(store: Any, embedder: Embedder, *, trusted_ca: str | None = None) -> Iterator[OAuthServer]:
    """The team server on 127.0.0.1 with OAuth; ``trusted_ca`` is the certificate file its
    fetches of client ID metadata documents trust (loopback hosts allowed)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=trusted_ca) if trusted_ca else True
    verifier, auth = team_auth(
        store.keys, base, documents=MetadataDocuments(allow_private=True, verify=verify)
    )
    service = LessonService(store, embedder, default_project="default")
    server = build_server(service, keys=KeyService(store.keys), token_verifier=verifier, auth=auth)
    app = build_app(
        server, host="127.0.0.1", health=lambda: None, store_name="test", rate_limit_per_minute=10_000
    )
    uv = uvicorn.Server(
        server_config(app, host="127.0.0.1", port=port, log_level="warning", drain_timeout_s=5)
    )
    thread = threading.Thread(target=lambda: asyncio.run(uv.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test OAuth server did not start"
        time.sleep(0.02)
    try:
        yield OAuthServer(base=base, url=f"{base}/mcp", keys=KeyService(store.keys))
    finally:
        uv.should_exit = True
        thread.join(timeout=30)


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


def self_signed(directory: Path) -> tuple[str, str]:
    """A certificate for localhost and 127.0.0.1 and its key, as files; (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_path), str(key_path)


def json_endpoint(body: Any) -> Any:
    async def endpoint(request: Any) -> JSONResponse:
        return JSONResponse(body)

    return endpoint


@contextlib.contextmanager
def metadata_documents(directory: Path, documents: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """An HTTPS server on localhost serving ``documents`` (path: JSON, where the string
    ``{base}`` in a value becomes the server's base URL); (base URL, certificate file)."""
    cert, key = self_signed(directory)
    port = free_port()
    base = f"https://localhost:{port}"

    def resolve(value: Any) -> Any:
        return json.loads(json.dumps(value).replace("{base}", base))

    routes = [Route(path, json_endpoint(resolve(body))) for path, body in documents.items()]
    server = serve_in_thread(Starlette(routes=routes), port, ssl_certfile=cert, ssl_keyfile=key)
    try:
        yield base, cert
    finally:
        server.should_exit = True
