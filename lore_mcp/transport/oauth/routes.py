"""The OAuth routes of the team server, on ``LoreOAuthProvider``, and the one 401 every refused credential
gets; Lore's versions of the SDK's routes say what it leaves out (see each)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.revoke import RevocationErrorResponse, RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.routes import (
    AUTHORIZATION_PATH,
    REVOCATION_PATH,
    TOKEN_PATH,
    build_metadata,
    build_resource_metadata_url,
    cors_middleware,
    validate_issuer_url,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyHttpUrl
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import Send

from lore_mcp.errors import UNAUTHORIZED
from lore_mcp.transport.guards import MCP_PATH
from lore_mcp.transport.oauth.clients import (
    LOOPBACK_HOSTS,
    DocumentRefused,
    MetadataDocuments,
    document_route,
    is_metadata_url,
)
from lore_mcp.transport.oauth.consent import ConsentPage
from lore_mcp.transport.oauth.provider import CONSENT_PATH, LoreOAuthProvider
from lore_mcp.transport.oauth.registration import error, registration_route
from lore_mcp.transport.oauth.tokens import LoreBearerVerifier, same_resource
from stores import CallCounts, KeyStore

# The JSON-RPC error code of a refused credential, beside lore_mcp.transport.guards' codes.
UNAUTHORIZED_JSONRPC_CODE = -32028
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
PRM_ROOT_PATH = "/.well-known/oauth-protected-resource"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


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
        answer: Response
        if not isinstance(asked, str) or same_resource(asked, self.resource):
            answer = await super().handle(request)
        else:
            sentence = (
                f"This server issues tokens only for {self.resource}; the resource {asked!r} is another one."
            )
            answer = self.response(TokenErrorResponse(error="invalid_target", error_description=sentence))
        return answer


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
    verifier.routes = oauth_routes(provider, settings.issuer_url, call_counts, registration=registration)
    return verifier, settings


def oauth_routes(
    provider: LoreOAuthProvider,
    issuer: AnyHttpUrl,
    call_counts: CallCounts | None = None,
    *,
    registration: str = "open",
) -> list[BaseRoute]:
    """Lore's versions of the SDK's five OAuth routes, consent and the page client's document. ``issuer`` is
    parsed as ``AuthSettings`` does (no trailing slash): clients compare ``issuer`` and ``iss`` exactly."""
    validate_issuer_url(issuer)
    options = ClientRegistrationOptions(enabled=True)
    revocation = RevocationOptions(enabled=True)
    authenticator = ClientAuthenticator(provider)
    tokens = LoreTokenHandler(provider, authenticator, resource=provider.resource)
    return [
        authorize_route(provider),
        client_route(REVOCATION_PATH, LoreRevocationHandler(provider, authenticator).handle),
        registration_route(provider, require_key=registration == "key", shared=call_counts),
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
    routes = [
        Route(AS_METADATA_PATH, cors_middleware(MetadataHandler(metadata).handle, verbs), methods=verbs)
    ]
    resource = ProtectedResourceMetadata(
        resource=AnyHttpUrl(provider.resource), authorization_servers=[issuer], resource_name="Lore"
    )
    handler = cors_middleware(ProtectedResourceMetadataHandler(resource).handle, verbs)
    derived = str(build_resource_metadata_url(AnyHttpUrl(provider.resource))).split("://", 1)[1]
    for path in dict.fromkeys(["/" + derived.split("/", 1)[1], PRM_ROOT_PATH]):
        routes.append(Route(path, handler, methods=verbs))
    return routes


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
