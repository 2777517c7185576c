"""A team server with OAuth for tests and a local HTTPS server for client ID metadata documents
(its self-signed certificate trusted by the test). The client side (a person answering the
consent page, the SDK client's handlers) is in ``tests.support.oauth_client``, re-exported here.

The server is the one ``lore-memory mcp --transport http`` serves on a loopback address
(``lore_mcp.transport.oauth.routes.team_auth``, ``lore_mcp.transport.http.build_app``),
under uvicorn in a thread, so clients speak real HTTP to it.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
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
from tests.support.oauth_client import (  # noqa: F401 (the client side, where the OAuth tests import it)
    REDIRECT,
    MemoryTokens,
    Person,
    client_metadata,
    consent,
    form_fields,
    pkce,
    redirect_params,
)
from tests.support.team import free_port, running


@dataclass
class OAuthServer:
    base: str  # the issuer
    url: str  # the /mcp resource
    keys: KeyService


@contextlib.contextmanager
def serve_in_thread(app: Any, port: int, **config: Any) -> Iterator[uvicorn.Server]:
    """``app`` on 127.0.0.1:``port`` for the duration of the block (``team.running``)."""
    with running(
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config))
    ) as server:
        yield server


@contextlib.contextmanager
def oauth_server(
    store: Any, embedder: Embedder, *, trusted_ca: str | None = None, registration: str = "open"
) -> Iterator[OAuthServer]:
    """The team server on 127.0.0.1 with OAuth; ``trusted_ca`` is the certificate file its
    fetches of client ID metadata documents trust (loopback hosts allowed); ``registration``
    is ``LORE_OAUTH_REGISTRATION``. Two on one Postgres store are two replicas."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=trusted_ca) if trusted_ca else True
    verifier, auth = team_auth(
        store.keys,
        base,
        documents=MetadataDocuments(allow_private=True, verify=verify),
        call_counts=store.call_counts,
        registration=registration,
    )
    service = LessonService(store, embedder, default_project="default")
    server = build_server(service, keys=KeyService(store.keys), token_verifier=verifier, auth=auth)
    app = build_app(
        server, host="127.0.0.1", health=lambda: None, store_name="test", rate_limit_per_minute=10_000
    )
    uv = uvicorn.Server(
        server_config(app, host="127.0.0.1", port=port, log_level="warning", drain_timeout_s=5)
    )
    with running(uv):
        yield OAuthServer(base=base, url=f"{base}/mcp", keys=KeyService(store.keys))


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
    with serve_in_thread(Starlette(routes=routes), port, ssl_certfile=cert, ssl_keyfile=key):
        yield base, cert
