"""``/register`` (RFC 7591) with limits fitting real clients, so whoever reaches the server cannot fill its
database through it (the SDK's handler accepts any size and number, from anyone).

Before the SDK's handler: a per-address rate (across replicas, as failed logins), optionally an API key
(``LORE_OAUTH_REGISTRATION=key``), bounds on the body and each field (real clients send under 1 KiB). A
client counts against its address until its first token; one that never gets one is deleted.
"""

from __future__ import annotations

import functools
import json
import math
from types import SimpleNamespace
from typing import Any, cast

from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.routes import REGISTRATION_PATH, cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthClientMetadata
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lore_mcp.transport.guards import SlidingWindowLimiter, buffered, client_address, count_failure
from lore_mcp.transport.oauth.provider import ClientsCrowded, LoreOAuthProvider
from stores import CallCounts

REGISTRATION_MAX_BYTES = 16 * 1024
MAX_REDIRECT_URIS = 10
# Entries of any other list (grant_types, contacts, ...), characters of any text, of a name.
MAX_ENTRIES = MAX_REDIRECT_URIS
MAX_TEXT = 2000
MAX_NAME = 200
REGISTRATIONS_PER_MINUTE = 10
REGISTER_DOOR = "register"
HEADERS = {"Cache-Control": "no-store"}


def metadata_problem(body: bytes) -> tuple[str, str] | None:
    """The RFC 7591 error for metadata over a limit, else None; only fields the SDK keeps are checked."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    uris = document.get("redirect_uris")
    if isinstance(uris, list) and len(uris) > MAX_REDIRECT_URIS:
        return "invalid_redirect_uri", f"A client may register at most {MAX_REDIRECT_URIS} redirect URIs."
    for name in OAuthClientMetadata.model_fields:
        why = _oversized(document.get(name), MAX_NAME if name == "client_name" else MAX_TEXT)
        if why:
            return "invalid_client_metadata", f"The field {name} {why}; send what the client needs."
    return None


def _oversized(value: Any, limit: int) -> str | None:
    """Why ``value`` is over the limits (a text of ``limit`` characters, ``MAX_ENTRIES`` entries)."""
    if isinstance(value, str):
        return f"is longer than {limit} characters" if len(value) > limit else None
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return None
    if len(value) > MAX_ENTRIES:
        return f"has more than {MAX_ENTRIES} entries"
    inner = (_oversized(item, MAX_TEXT) for item in value)
    return next(
        (f"holds a value that {why.removeprefix('holds a value that ')}" for why in inner if why), None
    )


def error(status: int, code: str, sentence: str, wait: float | None = None) -> Response:
    """An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2): never cached, ``Retry-After`` from ``wait``."""
    headers = dict(HEADERS)
    if wait is not None:
        headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return JSONResponse({"error": code, "error_description": sentence}, status_code=status, headers=headers)


class Registration:
    """``POST /register``: the limits (``require_key``: only with an API key), then the SDK's handler."""

    def __init__(self, provider: LoreOAuthProvider, *, require_key: bool, shared: CallCounts | None) -> None:
        self.provider = provider
        self.require_key = require_key
        self.shared = shared
        self.limiter = SlidingWindowLimiter(REGISTRATIONS_PER_MINUTE)

    async def handle(self, request: Request) -> Response:
        address = client_address(request.scope)
        refused = await self._refused(request, address)
        if refused is not None:
            return refused
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > REGISTRATION_MAX_BYTES:
            body, receive = None, request.receive  # the rest is left unread
        else:
            body, receive = await buffered(request.receive, limit=REGISTRATION_MAX_BYTES)
        if body is None:
            return error(
                413,
                "invalid_client_metadata",
                f"Client metadata is limited to {REGISTRATION_MAX_BYTES} bytes.",
            )
        problem = metadata_problem(body)
        if problem is not None:
            return error(400, *problem)
        # The provider as the SDK's handler sees it for one registration from ``address``.
        register = functools.partial(self.provider.register_client, address=address)
        sdk = RegistrationHandler(
            cast(Any, SimpleNamespace(register_client=register)), ClientRegistrationOptions(enabled=True)
        )
        try:
            answer: Response = await sdk.handle(Request(request.scope, receive))
        except ClientsCrowded as crowded:
            return error(
                429,
                "temporarily_unavailable",
                "Your address has registered too many clients that nobody has signed in with yet; "
                "use one of them, or retry once the oldest expires.",
                crowded.wait,
            )
        return answer

    async def _refused(self, request: Request, address: str) -> Response | None:
        """The answer to a registration over the address's rate, or without the key it needs."""
        wait = self.limiter.wait(address)
        if wait is not None:
            sentence = f"More than {REGISTRATIONS_PER_MINUTE} registrations a minute came from your address; retry later."
            return error(429, "temporarily_unavailable", sentence, wait)
        # Each registration spends the address's allowance, counted as a failed login is.
        await count_failure(self.limiter, address, self.shared, door=REGISTER_DOOR)
        if not self.require_key or await self._has_key(request):
            return None
        refused = error(
            401,
            "invalid_token",
            "This server registers clients only for a request with the header Authorization: Bearer "
            "and a current Lore API key (lore_sk_…); ask your Lore admin to register the client.",
        )
        refused.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'  # RFC 6750 §3
        return refused

    async def _has_key(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.startswith("lore_sk_"):
            return False
        return await self.provider.verifier.api_keys.verify_token(token) is not None


def registration_route(
    provider: LoreOAuthProvider, *, require_key: bool = False, shared: CallCounts | None = None
) -> Route:
    """``/register`` as the SDK serves it (CORS, for the Inspector in a browser), with the limits."""
    methods = ["POST", "OPTIONS"]
    handler = Registration(provider, require_key=require_key, shared=shared)
    return Route(REGISTRATION_PATH, cors_middleware(handler.handle, methods), methods=methods)
