"""Token revocation (RFC 7009) that public clients can use.

The SDK's ``/revoke`` requires a ``client_secret``, so a public client (only ``client_id``: RFC 7009
§2.1), such as the page signing out, could not revoke. This authenticates as the SDK does (confidential
clients still need the secret), revokes the client's own token, and answers 200 for an unknown one, so
the answer says nothing about which tokens exist.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.handlers.revoke import RevocationErrorResponse, RevocationHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.routes import REVOCATION_PATH
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class LoreRevocationHandler(RevocationHandler):
    """``/revoke`` for confidential and public clients alike."""

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


def revocation_route(provider: Any) -> Route:
    """The ``/revoke`` route."""
    return client_route(
        REVOCATION_PATH, LoreRevocationHandler(provider, ClientAuthenticator(provider)).handle
    )


def client_route(path: str, handle: Any) -> Route:
    """A route clients post a form to, wrapped as the SDK wraps its own (a body limit, CORS for browsers)."""
    methods = ["POST", "OPTIONS"]
    limited = RequestBodyLimitMiddleware(request_response(handle), DEFAULT_MAX_REQUEST_BODY_SIZE)
    cors = CORSMiddleware(
        limited, allow_origins="*", allow_methods=methods, allow_headers=[MCP_PROTOCOL_VERSION_HEADER]
    )
    return Route(path, endpoint=cors, methods=methods)
