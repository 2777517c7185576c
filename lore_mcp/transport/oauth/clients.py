"""OAuth clients, registered (RFC 7591) or known by a client ID metadata document (an HTTPS ``client_id``
whose JSON names it and its redirect URIs). Any caller can make the server fetch a document, so the fetch
reaches only public addresses (no spelling of ``127.0.0.1`` or DNS answer reaches this machine or network),
bounded in time, body and concurrency. A redirect URI must match a declared one exactly (a loopback one on
any port: RFC 8252 §7.3) and its scheme an allow-list, so one the browser runs or reads itself
(``javascript:``, ``data:``, ``file:``, …) never receives a code or an error."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import ssl
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull
from pydantic import AnyHttpUrl, AnyUrl, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

logger = logging.getLogger("lore_mcp.transport.oauth")

PAGE_PATH = "/ui/"
PAGE_CLIENT_PATH = "/ui/oauth-client.json"
PAGE_CLIENT_NAME = "Lore's page for people"
CIMD_MAX_BYTES = 5 * 1024  # a real document is a few hundred bytes
CIMD_TIMEOUT_S = 5.0  # resolving, connecting and reading, in all
# How long a fetched document is used, and a refused one refused, before it is fetched again.
CIMD_TTL_S = 300.0
CIMD_REFUSED_TTL_S = 60.0
CIMD_CACHE_MAX = 1000
CIMD_CONCURRENT = 8  # fetches at once; one more is refused at once rather than queued
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
APP_SCHEMES = ("cursor", "vscode", "vscode-insiders")  # app schemes not in reverse-domain form
REDIRECT_RULE = (
    "use https, http on a loopback address (127.0.0.1, [::1], localhost), or an app's own scheme in "
    "reverse-domain form (com.example.app:/callback) or cursor:, vscode:, without a fragment."
)


def is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


def redirect_allowed(uri: str) -> bool:
    """Whether ``uri`` may receive a code; never with a fragment (RFC 6749 §3.1.2)."""
    parts = urlsplit(uri)  # which lowers the scheme
    if parts.fragment or not parts.scheme:
        return False
    if parts.scheme in ("http", "https"):
        return is_loopback_redirect(uri) if parts.scheme == "http" else bool(parts.hostname)
    return "." in parts.scheme or parts.scheme in APP_SCHEMES


def redirect_matches(requested: str, registered: str) -> bool:
    """Exact match; for loopback URIs, exact but for the port."""

    def without_port(uri: str) -> str:
        parts = urlsplit(uri)
        host = parts.hostname or ""
        return parts._replace(netloc=f"[{host}]" if ":" in host else host).geturl()

    loopback = is_loopback_redirect(requested) and is_loopback_redirect(registered)
    return requested == registered or (loopback and without_port(requested) == without_port(registered))


class LoreClient(OAuthClientInformationFull):
    """A client as the SDK's handlers see it, with Lore's redirect URI rule."""

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        """Lore has no scopes: a grant reaches what its key and project reach, whatever is asked for."""
        del requested_scope
        return []

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = [str(uri) for uri in self.redirect_uris or []]
        if redirect_uri is None and len(registered) != 1:
            raise InvalidRedirectUriError("redirect_uri is required: this client declared several.")
        chosen = str(redirect_uri) if redirect_uri is not None else registered[0]
        if not redirect_allowed(chosen):  # a client stored before the rule, say
            raise InvalidRedirectUriError(f"The redirect_uri {chosen!r} is refused: {REDIRECT_RULE}")
        if any(redirect_matches(chosen, uri) for uri in registered):
            return AnyUrl(chosen) if redirect_uri is None else redirect_uri
        raise InvalidRedirectUriError(
            f"The redirect_uri {chosen!r} is not one this client declared; it must match one exactly "
            "(a loopback http URI may differ only in its port)."
        )


def check_redirect_uris(uris: list[str]) -> None:
    for uri in uris:
        if not redirect_allowed(uri):
            raise RegistrationError(
                "invalid_redirect_uri", f"The redirect URI {uri!r} is refused: {REDIRECT_RULE}"
            )


def is_metadata_url(client_id: str) -> bool:
    """Whether ``client_id`` names a client ID metadata document (an HTTPS URL with a path)."""
    parts = urlsplit(client_id)
    return parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/")


class DocumentRefused(ValueError):
    """Why a metadata document is not used: a clause for the client's error description."""


class MetadataDocuments:
    """Metadata documents, fetched and cached; ``allow_private`` admits private addresses (tests, a LAN)."""

    def __init__(self, *, allow_private: bool = False, verify: ssl.SSLContext | bool = True) -> None:
        self.allow_private, self.verify = allow_private, verify
        self._cache: OrderedDict[str, tuple[float, LoreClient | str]] = OrderedDict()
        self._fetching = 0

    async def client(self, url: str) -> LoreClient | None:
        try:
            return await self.fetch(url)
        except DocumentRefused:
            return None

    async def fetch(self, url: str) -> LoreClient:
        """The client ``url`` describes; ``DocumentRefused`` saying why where it cannot be used."""
        cached = self._cache.get(url)
        if cached is not None and cached[0] > time.monotonic():
            outcome = cached[1]
        else:
            outcome = await self._outcome(url)
            ttl = CIMD_REFUSED_TTL_S if isinstance(outcome, str) else CIMD_TTL_S
            self._cache[url] = (time.monotonic() + ttl, outcome)
            self._cache.move_to_end(url)
            while len(self._cache) > CIMD_CACHE_MAX:
                self._cache.popitem(last=False)
        if isinstance(outcome, str):
            raise DocumentRefused(outcome)
        return outcome

    async def _outcome(self, url: str) -> LoreClient | str:
        """The client fetched, or why it is refused (logged); too many at once raises, unremembered."""
        if self._fetching >= CIMD_CONCURRENT:
            raise DocumentRefused("the server is fetching too many client documents at once; try again soon")
        self._fetching += 1
        try:
            with anyio.fail_after(CIMD_TIMEOUT_S):
                return await self._fetch(url)
        except TimeoutError:
            outcome = f"it did not arrive within {CIMD_TIMEOUT_S:g} seconds"
        except DocumentRefused as exc:
            outcome = str(exc)
        except (ValueError, RecursionError, ValidationError):
            outcome = "it is not a valid JSON client description"
        except httpx2.InvalidURL:
            outcome = "its URL is not one that can be fetched"
        except (httpx2.HTTPError, OSError) as exc:
            logger.warning("client ID metadata document %s could not be fetched: %r", url, exc)
            outcome = "it could not be fetched"
        finally:
            self._fetching -= 1
        logger.warning("client ID metadata document %s refused: %s", url, outcome)
        return outcome

    async def _fetch(self, url: str) -> LoreClient:
        target = httpx2.URL(url)
        addresses = await self._addresses(target.raw_host.decode("ascii"), target.port or 443)
        async with httpx2.AsyncClient(verify=self.verify, follow_redirects=False, trust_env=False) as http:
            response = await self._send(http, target, addresses)
            try:
                if response.status_code != 200:
                    raise DocumentRefused(f"it answered HTTP {response.status_code}")
                body = b""
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > CIMD_MAX_BYTES:
                        raise DocumentRefused(f"it is larger than {CIMD_MAX_BYTES} bytes")
            finally:
                await response.aclose()
        return client_from_document(url, json.loads(body))

    async def _addresses(self, host: str, port: int) -> list[str]:
        """What ``host`` resolves to, each public (IPv4-mapped judged as IPv4): no name or spelling read as
        local (``127.1``, ``2130706433``, ``0x7f000001``, ``0``) reaches this machine or network."""
        try:
            found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise DocumentRefused(f"its host {host} does not resolve") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in found]
        for address in addresses:
            mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
            if not (self.allow_private or (mapped or address).is_global):
                raise DocumentRefused(
                    f"its host {host} is not a public address (this machine or a private network)"
                )
        return [str(address) for address in addresses]

    @staticmethod
    async def _send(http: httpx2.AsyncClient, target: httpx2.URL, addresses: list[str]) -> httpx2.Response:
        """The response of the first checked address that connects: no second lookup, while TLS and Host
        name the host. Identity encoding: a compressed body could swell past the size limit in one chunk."""
        host = target.raw_host.decode("ascii")
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "Host": target.netloc.decode(),
        }
        for address in addresses:
            request = http.build_request(
                "GET", target.copy_with(host=address), headers=headers, extensions={"sni_hostname": host}
            )
            try:
                return await http.send(request, stream=True)
            except httpx2.ConnectError as exc:
                failed = exc
        raise failed


def client_from_document(url: str, document: Any) -> LoreClient:
    """The client a metadata document describes: a public client (no secret) whose id is ``url``."""
    if not isinstance(document, dict) or document.get("client_id") != url:
        raise DocumentRefused("its client_id is not the URL it was fetched from")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise DocumentRefused("it names no redirect_uris")
    if document.get("token_endpoint_auth_method", "none") != "none":
        raise DocumentRefused("only public clients (token_endpoint_auth_method none) are supported")
    try:
        check_redirect_uris(uris)
    except RegistrationError as exc:
        raise DocumentRefused(exc.error_description or "a redirect URI is refused") from None
    names = ("client_name", "client_uri", "logo_uri")
    fields = {k: document[k] for k in names if isinstance(document.get(k), str)}
    return LoreClient(
        client_id=url,
        redirect_uris=[AnyUrl(u) for u in uris],
        token_endpoint_auth_method="none",  # grant and response types: the SDK's defaults, code and refresh
        **fields,
    )


class PageClient(LoreClient):
    """The page for people (``/ui``), a public client its own server knows without registering (a row per
    sign-in) or fetching itself: the provider knows ``{issuer}/ui/oauth-client.json`` in process and serves
    that document there. Its one redirect URI, ``{issuer}/ui/``, is matched exactly, port included."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        own = str((self.redirect_uris or [])[0])
        if redirect_uri is None or str(redirect_uri) == own:
            return AnyUrl(own)
        raise InvalidRedirectUriError(
            f"The redirect_uri {str(redirect_uri)!r} is refused: Lore's page returns only to {own}."
        )


def page_client(issuer: str) -> PageClient:
    base = issuer.rstrip("/")
    return PageClient(
        client_id=base + PAGE_CLIENT_PATH,
        client_name=PAGE_CLIENT_NAME,
        client_uri=AnyHttpUrl(base + PAGE_PATH),
        redirect_uris=[AnyUrl(base + PAGE_PATH)],
        token_endpoint_auth_method="none",
    )


def document_route(client: PageClient) -> Route:
    fields = ("client_id", "client_name", "client_uri", "redirect_uris", "grant_types", "response_types")
    document = client.model_dump(mode="json", include={*fields, "token_endpoint_auth_method"})

    async def serve(request: Request) -> Response:
        return JSONResponse(
            document, headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        )

    return Route(PAGE_CLIENT_PATH, serve, methods=["GET"])
