"""What ``/mcp`` accepts as a bearer token: a Lore API key, or an access token this server issued. OAuth
credentials carry a prefix naming what they are (so a pasted one is redacted like an API key); only their
SHA-256 is stored. An access token's approving key is looked up on every request, so revoking that key ends
the token at the next one."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from mcp.server.auth.provider import AccessToken
from starlette.routing import BaseRoute

from lore_mcp.auth import Caller, secret_digest
from lore_mcp.key_tokens import ApiKeyVerifier, LoreAccessToken
from stores import ApiKey, KeyStore, OAuthGrant

ACCESS_PREFIX = "lore_at_"
REFRESH_PREFIX = "lore_rt_"
CODE_PREFIX = "lore_ac_"
ACCESS_TOKEN_TTL_S = 15 * 60  # short-lived: a stolen one is worth minutes, and clients refresh quietly
REFRESH_TOKEN_TTL_S = 30 * 24 * 3600  # rotates on every use; unused, it lapses and the person consents again
CODE_TTL_S = 5 * 60  # to exchange a code in (RFC 6749 recommends at most ten minutes)


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def same_resource(a: str, b: str) -> bool:
    """RFC 8707 resources compared as the SDK's bearer check does: a trailing slash aside."""
    return a.rstrip("/") == b.rstrip("/")


def caller_for(key: ApiKey, grant: OAuthGrant, page_client_id: str | None = None) -> Caller:
    """An OAuth token's caller: its key's org and name, the project granted, never root (a connector does
    not manage keys); a person when granted to the page's client, whose tokens return only to the page."""
    person = page_client_id is not None and grant.client_id == page_client_id
    project = grant.project or key.project
    return Caller(key_id=key.id, org=key.org, name=key.name, project=project, root=False, person=person)


class LoreBearerVerifier:
    """``/mcp``'s verifier: API keys as ``ApiKeyVerifier``, access tokens against row and key per request."""

    def __init__(self, keys: KeyStore, resource: str, *, api_keys: ApiKeyVerifier | None = None) -> None:
        self.keys, self.resource = keys, resource
        self.api_keys = api_keys or ApiKeyVerifier(keys)
        self.bounded = self.api_keys.bounded  # a store call on a worker thread, bounded as key lookups are
        self.routes: list[BaseRoute] = []  # the OAuth routes beside /mcp (``team_auth``); empty: keys only
        self.page_client_id: str | None = None  # the page's client (``PageClient``) where OAuth is offered

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token.startswith(ACCESS_PREFIX):
            return await self.api_keys.verify_token(token)
        row = await self.bounded(self.keys.oauth.token, secret_digest(token))
        if row is None or row.kind != "access" or row.revoked or row.expires_at <= datetime.now(UTC):
            return None
        key = await self.live_key(row.grant) if same_resource(row.grant.resource, self.resource) else None
        if key is None:
            return None
        return LoreAccessToken(
            token=token,
            client_id=row.grant.client_id,
            scopes=list(row.grant.scopes),
            expires_at=int(row.expires_at.timestamp()),
            resource=row.grant.resource,
            caller=caller_for(key, row.grant, self.page_client_id),
        )

    async def live_key(self, grant: OAuthGrant) -> ApiKey | None:
        """The key behind ``grant``, or None once it is revoked (or gone)."""
        key = await self.bounded(self.keys.key_by_id, grant.org, grant.key_id)
        return key if key is not None and key.revoked_at is None else None
