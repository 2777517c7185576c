"""The page for people (``/ui``) as an OAuth client that its own server knows without registering.

A public client (no secret, PKCE S256). Registering would leave a row per sign-in, and a metadata
document would have the server fetch itself; so the provider knows ``{issuer}/ui/oauth-client.json``
in process and serves that document there, meaning what any such id means. Its one redirect URI,
``{issuer}/ui/``, is matched exactly, port included: another port is another program.
"""

from __future__ import annotations

from mcp.shared.auth import InvalidRedirectUriError
from pydantic import AnyHttpUrl, AnyUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lore_mcp.transport.oauth.clients import LoreClient

PAGE_PATH = "/ui/"
PAGE_CLIENT_PATH = "/ui/oauth-client.json"
PAGE_CLIENT_NAME = "Lore's page for people"


class PageClient(LoreClient):
    """The page's client: its redirect URI is the page's address and nothing else."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        own = str((self.redirect_uris or [])[0])
        if redirect_uri is None or str(redirect_uri) == own:
            return AnyUrl(own)
        raise InvalidRedirectUriError(
            f"The redirect_uri {str(redirect_uri)!r} is refused: Lore's page returns only to {own}."
        )


def page_client(issuer: str) -> PageClient:
    """The page's client on the server whose issuer is ``issuer``."""
    base = issuer.rstrip("/")
    return PageClient(
        client_id=base + PAGE_CLIENT_PATH,
        client_name=PAGE_CLIENT_NAME,
        client_uri=AnyHttpUrl(base + PAGE_PATH),
        redirect_uris=[AnyUrl(base + PAGE_PATH)],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )


def document_route(client: PageClient) -> Route:
    """The page client's metadata document at its id's path, for anyone who reads it."""
    fields = ("client_id", "client_name", "client_uri", "redirect_uris", "grant_types", "response_types")
    document = client.model_dump(mode="json", include={*fields, "token_endpoint_auth_method"})

    async def serve(request: Request) -> Response:
        return JSONResponse(
            document, headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        )

    return Route(PAGE_CLIENT_PATH, serve, methods=["GET"])
