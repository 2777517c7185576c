"""The OAuth routes of the team server, on ``LoreOAuthProvider``, and the one 401 every refused credential
gets; Lore's versions of the SDK's routes (authorize, token, revoke, register, metadata) say what it leaves
out (see each)."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationErrorResponse, RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.routes import (
    AUTHORIZATION_PATH,
    REGISTRATION_PATH,
    REVOCATION_PATH,
    TOKEN_PATH,
    build_metadata,
    cors_middleware,
    create_protected_resource_routes,
    validate_issuer_url,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyHttpUrl
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import Send

from lore_mcp.errors import UNAUTHORIZED
from lore_mcp.transport.guards import MCP_PATH, SlidingWindowLimiter, buffered, client_address, count_failure
from lore_mcp.transport.oauth.clients import (
    LOOPBACK_HOSTS,
    DocumentRefused,
    MetadataDocuments,
    document_route,
    is_metadata_url,
)
from lore_mcp.transport.oauth.consent import ConsentPage
from lore_mcp.transport.oauth.provider import CONSENT_PATH, ClientsCrowded, LoreOAuthProvider
from lore_mcp.transport.oauth.tokens import LoreBearerVerifier, same_resource
from stores import CallCounts, KeyStore

UNAUTHORIZED_JSONRPC_CODE = -32028  # a refused credential's, beside the guards' codes
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
PRM_ROOT_PATH = "/.well-known/oauth-protected-resource"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
REGISTRATION_MAX_BYTES = 16 * 1024
MAX_REDIRECT_URIS = 10
# Entries of any other list (grant_types, contacts, ...), characters of any text, of a name.
MAX_ENTRIES = MAX_REDIRECT_URIS
MAX_TEXT = 2000
MAX_NAME = 200
REGISTRATIONS_PER_MINUTE = 10
REGISTER_DOOR = "register"


def refused_response(metadata_url: str | None) -> JSONResponse:
    """The 401 of every refused credential: one sentence for all, so a guesser learns nothing. OAuth clients
    read ``WWW-Authenticate`` (RFC 6750 §3, RFC 9728 §5.1); MCP clients show the JSON-RPC error body."""
    where = (
        f"connect with OAuth as {metadata_url} describes, or "
        if metadata_url
        else "ask your Lore admin for a key, or "
    )
    sentence = (
        f"{UNAUTHORIZED}: This request needs the header Authorization: Bearer followed by a current Lore "
        "API key (lore_sk_ and 32 letters and digits) or an access token this server issued, and the one "
        f"sent was missing, malformed, unknown, expired or revoked; {where}see the team server section "
        "of Lore's README."
    )
    parts = ['error="invalid_token"', f'error_description="{sentence}"']
    if metadata_url:
        parts.insert(0, f'resource_metadata="{metadata_url}"')
    data = {"error": "invalid_token", "resource_metadata": metadata_url}
    error = {"code": UNAUTHORIZED_JSONRPC_CODE, "message": sentence, "data": data}
    body = {"jsonrpc": "2.0", "id": None, "error": error}
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer " + ", ".join(parts)})


class LoreRequireAuth(RequireAuthMiddleware):
    """The SDK's guard of ``/mcp``, answering a refused credential with Lore's 401."""

    async def _send_auth_error(self, send: Send, status_code: int, error: str, description: str) -> None:
        if status_code != 401:
            await super()._send_auth_error(send, status_code, error, description)
            return
        refused = refused_response(str(self.resource_metadata_url) if self.resource_metadata_url else None)
        await send({"type": "http.response.start", "status": 401, "headers": refused.raw_headers})
        await send({"type": "http.response.body", "body": refused.body})


@dataclass
class LoreTokenHandler(TokenHandler):
    """The SDK's ``/token`` ignores ``resource``: another server's gets ``invalid_target`` (RFC 8707)."""

    resource: str = ""

    async def handle(self, request: Request) -> Response:
        asked = (await request.form()).get("resource")
        if not isinstance(asked, str) or same_resource(asked, self.resource):
            return cast(Response, await super().handle(request))
        sentence = (
            f"This server issues tokens only for {self.resource}; the resource {asked!r} is another one."
        )
        refused = TokenErrorResponse(error="invalid_target", error_description=sentence)
        return cast(Response, self.response(refused))


class LoreRevocationHandler(RevocationHandler):
    """For public clients too: the SDK's ``/revoke`` requires a ``client_secret``, so a public client (RFC
    7009 §2.1), such as the page signing out, could not revoke. It authenticates as the SDK does
    (confidential clients still need the secret), revokes the client's own token, and answers 200 for an
    unknown one, so the answer says nothing about which tokens exist."""

    async def handle(self, request: Request) -> Response:
        try:
            client = await self.client_authenticator.authenticate_request(request)
        except AuthenticationError as exc:
            error = RevocationErrorResponse(error="unauthorized_client", error_description=exc.message)
            return PydanticJSONResponse(status_code=401, content=error)
        token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            error = RevocationErrorResponse(
                error="invalid_request", error_description="The form needs the token to revoke."
            )
            return PydanticJSONResponse(status_code=400, content=error)
        found: Any = await self.provider.load_access_token(token)
        if found is None:
            found = await self.provider.load_refresh_token(client, token)
        if found is not None and found.client_id == client.client_id:
            await self.provider.revoke_token(found)
        return Response(status_code=200, headers=NO_STORE)


def client_route(path: str, handle: Any) -> Route:
    """A route clients post a form to, wrapped as the SDK wraps its own (a body limit, CORS for browsers)."""
    methods = ["POST", "OPTIONS"]
    limited = RequestBodyLimitMiddleware(request_response(handle), DEFAULT_MAX_REQUEST_BODY_SIZE)
    cors = CORSMiddleware(
        limited, allow_origins="*", allow_methods=methods, allow_headers=[MCP_PROTOCOL_VERSION_HEADER]
    )
    return Route(path, endpoint=cors, methods=methods)


def oauth_possible(issuer: str) -> bool:
    """Whether ``issuer`` can be an OAuth issuer: HTTPS, or HTTP on a loopback address (RFC 8414)."""
    parts = urlsplit(issuer)
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)


def team_auth(
    keys: KeyStore,
    issuer: str,
    *,
    documents: MetadataDocuments | None = None,
    call_counts: CallCounts | None = None,
    registration: str = "open",
) -> tuple[LoreBearerVerifier, AuthSettings]:
    """Verifier and auth settings: OAuth where ``issuer`` can be one, else keys; counts span replicas."""
    issuer = issuer.rstrip("/")
    resource = issuer + MCP_PATH
    verifier = LoreBearerVerifier(keys, resource)
    # Strings, so AuthSettings parses them keeping an empty path empty (no trailing slash).
    if not oauth_possible(issuer):
        return verifier, AuthSettings.model_validate({"issuer_url": issuer, "resource_server_url": None})
    # The verifier checks each token's resource itself: API keys have none.
    settings = AuthSettings.model_validate(
        {"issuer_url": issuer, "resource_server_url": resource, "validate_token_resource": False}
    )
    provider = LoreOAuthProvider(verifier, issuer=str(settings.issuer_url), documents=documents)
    verifier.page_client_id = provider.page.client_id
    verifier.routes = oauth_routes(provider, settings.issuer_url, call_counts, registration)
    return verifier, settings


def oauth_routes(
    provider: LoreOAuthProvider, issuer: AnyHttpUrl, call_counts: CallCounts | None, registration: str
) -> list[BaseRoute]:
    """Lore's versions of the SDK's five OAuth routes, consent and the page client's document. ``issuer`` is
    parsed as ``AuthSettings`` does (no trailing slash): clients compare ``issuer`` and ``iss`` exactly."""
    validate_issuer_url(issuer)
    options = ClientRegistrationOptions(enabled=True)
    revocation = RevocationOptions(enabled=True)
    authenticator = ClientAuthenticator(provider)
    tokens = LoreTokenHandler(provider, authenticator, resource=provider.resource)
    register = Registration(provider, require_key=registration == "key", shared=call_counts)
    posts = ["POST", "OPTIONS"]
    return [
        authorize_route(provider),
        client_route(REVOCATION_PATH, LoreRevocationHandler(provider, authenticator).handle),
        # ``/register`` as the SDK serves it (CORS, for the Inspector in a browser), with the limits.
        Route(REGISTRATION_PATH, cors_middleware(register.handle, posts), methods=posts),
        client_route(TOKEN_PATH, tokens.handle),
        *metadata_routes(provider, issuer, build_metadata(issuer, None, options, revocation)),
        Route(CONSENT_PATH, ConsentPage(provider, call_counts).handle, methods=["GET", "POST"]),
        document_route(provider.page),
    ]


def metadata_routes(provider: LoreOAuthProvider, issuer: AnyHttpUrl, metadata: OAuthMetadata) -> list[Route]:
    """RFC 8414 metadata with what the SDK's leaves out (``iss`` in the response, RFC 9207; client ID metadata
    documents accepted), and RFC 9728 metadata at ``/mcp``'s derived path and the bare well-known one."""
    metadata.authorization_response_iss_parameter_supported = True
    metadata.client_id_metadata_document_supported = True
    methods = ["none", "client_secret_post", "client_secret_basic"]
    metadata.token_endpoint_auth_methods_supported = methods
    metadata.revocation_endpoint_auth_methods_supported = list(methods)
    verbs = ["GET", "OPTIONS"]
    derived = create_protected_resource_routes(AnyHttpUrl(provider.resource), [issuer], resource_name="Lore")
    return [
        Route(AS_METADATA_PATH, cors_middleware(MetadataHandler(metadata).handle, verbs), methods=verbs),
        *derived,
        Route(PRM_ROOT_PATH, derived[0].endpoint, methods=verbs),
    ]


def authorize_route(provider: LoreOAuthProvider) -> Route:
    """The SDK's ``/authorize``, saying why a metadata document was refused, not just "not found"."""
    handler = AuthorizationHandler(provider).handle

    async def authorize(request: Request) -> Response:
        params = request.query_params if request.method == "GET" else await request.form()
        client_id = params.get("client_id")
        if isinstance(client_id, str) and is_metadata_url(client_id) and client_id != provider.page.client_id:
            try:
                await provider.documents.fetch(client_id)  # remembered: the SDK's handler fetches nothing
            except DocumentRefused as exc:
                reason = str(exc).rstrip(".")
                sentence = f"The client ID metadata document {client_id} is refused: {reason}."
                return error(400, "invalid_request", sentence)
        return await handler(request)

    endpoint = RequestBodyLimitMiddleware(request_response(authorize), DEFAULT_MAX_REQUEST_BODY_SIZE)
    return Route(AUTHORIZATION_PATH, endpoint, methods=["GET", "POST"])


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
    headers = {"Cache-Control": "no-store"}
    if wait is not None:
        headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return JSONResponse({"error": code, "error_description": sentence}, status_code=status, headers=headers)


class Registration:
    """``POST /register`` (RFC 7591) with limits fitting real clients, so whoever reaches the server cannot
    fill its database through it (the SDK's handler accepts any size and number, from anyone): a per-address
    rate (across replicas), optionally an API key (``require_key``), bounds on the body and each field (real
    clients send under 1 KiB). A client counts against its address until its first token; one that never
    gets one is deleted."""

    def __init__(self, provider: LoreOAuthProvider, *, require_key: bool, shared: CallCounts | None) -> None:
        self.provider, self.require_key, self.shared = provider, require_key, shared
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
            sentence = f"Client metadata is limited to {REGISTRATION_MAX_BYTES} bytes."
            return error(413, "invalid_client_metadata", sentence)
        problem = metadata_problem(body)
        if problem is not None:
            return error(400, *problem)
        # The provider as the SDK's handler sees it for one registration from ``address``.
        register = functools.partial(self.provider.register_client, address=address)
        sdk = RegistrationHandler(
            cast(Any, SimpleNamespace(register_client=register)), ClientRegistrationOptions(enabled=True)
        )
        try:
            return await sdk.handle(Request(request.scope, receive))
        except ClientsCrowded as crowded:
            sentence = (
                "Your address has registered too many clients that nobody has signed in with yet; "
                "use one of them, or retry once the oldest expires."
            )
            return error(429, "temporarily_unavailable", sentence, crowded.wait)

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
