"""The SDK's ``OAuthAuthorizationServerProvider`` over the store's OAuth rows. The SDK's handlers check each
request (PKCE S256, the code's client, expiry, redirect URI, secrets); this decides which clients exist and
what codes and tokens bind to: a code comes only from the consent page, for the key entered there; tokens
bind to that key, its org, the project granted and this resource (RFC 8707). Each use of a code or refresh
token is recorded, so a replay is refused and revokes every token the authorization produced."""

from __future__ import annotations

import re
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from itsdangerous import BadData, URLSafeTimedSerializer
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from lore_mcp.auth import secret_digest
from lore_mcp.transport.oauth.clients import (
    LoreClient,
    MetadataDocuments,
    check_redirect_uris,
    is_metadata_url,
    page_client,
)
from lore_mcp.transport.oauth.tokens import (
    ACCESS_PREFIX,
    ACCESS_TOKEN_TTL_S,
    CODE_PREFIX,
    CODE_TTL_S,
    REFRESH_PREFIX,
    REFRESH_TOKEN_TTL_S,
    LoreBearerVerifier,
    new_secret,
    same_resource,
)
from stores import ApiKey, OAuthCode, OAuthGrant, OAuthTokenRow

CONSENT_PATH = "/oauth/consent"
# Token-less clients one address may hold, kept this long: a person approves minutes after registering.
UNUSED_CLIENTS_PER_ADDRESS = 20
UNUSED_CLIENT_TTL = timedelta(hours=24)
CODE_CHALLENGE = re.compile(r"[A-Za-z0-9._~-]{43,128}")  # RFC 7636 §4.2 (S256 gives 43 characters)
REQUEST_MAX_AGE_S = 10 * 60  # how long a person has to answer the consent page
REMEMBER_MAX_AGE_S = 30 * 24 * 3600  # how long a browser remembers the key it approved with


class Signed(URLSafeTimedSerializer):
    """Values signed for one purpose (its salt), never accepted for another; altered or too old, refused."""

    def __init__(self, secret: str, purpose: str, max_age: int) -> None:
        super().__init__(secret, salt=f"lore-oauth-{purpose}")
        self.max_age = max_age

    def check(self, signed: str) -> dict[str, Any] | None:
        try:
            value = self.loads(signed, max_age=self.max_age)
        except BadData:
            return None
        return value if isinstance(value, dict) else None


class ClientsCrowded(Exception):
    """An address already has ``UNUSED_CLIENTS_PER_ADDRESS`` unused clients; room in ``wait`` s."""

    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


class LoreOAuthProvider:
    def __init__(
        self, verifier: LoreBearerVerifier, *, issuer: str, documents: MetadataDocuments | None = None
    ) -> None:
        self.verifier, self.keys, self.issuer = verifier, verifier.keys, issuer
        self.resource = verifier.resource
        self.documents = documents or MetadataDocuments()
        self.page = page_client(issuer)  # the page for people: known without registering or fetching
        self._signed: dict[str, Signed] = {}
        self._store = verifier.bounded

    async def signed(self, purpose: str) -> Signed:
        """The consent page's round-tripped values (the pending ``request``, the cookie to ``remember`` a key)
        under one secret in the store, so every replica accepts another's."""
        if not self._signed:
            secret = await self._store(self.keys.oauth.secret, "consent", secrets.token_urlsafe(32))
            ages = {"request": REQUEST_MAX_AGE_S, "remember": REMEMBER_MAX_AGE_S}
            self._signed = {name: Signed(secret, name, age) for name, age in ages.items()}
        return self._signed[purpose]

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if client_id == self.page.client_id:
            return self.page
        if is_metadata_url(client_id):
            return await self.documents.client(client_id)
        stored = await self._store(self.keys.oauth.client, client_id)
        return LoreClient.model_validate(stored) if stored is not None else None

    async def register_client(
        self, client_info: OAuthClientInformationFull, address: str = "unknown"
    ) -> None:
        """Store a client; ``ClientsCrowded`` when ``address`` has too many unused (stale ones go first)."""
        check_redirect_uris([str(uri) for uri in client_info.redirect_uris or []])
        wait = await self._store(
            self.keys.oauth.register_client,
            client_info.client_id,
            client_info.model_dump(mode="json", exclude_none=True),
            address,
            datetime.now(UTC),
            UNUSED_CLIENTS_PER_ADDRESS,
            UNUSED_CLIENT_TTL,
        )
        if wait is not None:
            raise ClientsCrowded(wait)

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """The consent page's URL carrying the request signed (nothing is stored until approval)."""
        if not CODE_CHALLENGE.fullmatch(params.code_challenge):
            raise AuthorizeError(
                "invalid_request",
                "The code_challenge must be 43 to 128 letters, digits and -._~ (RFC 7636): the S256 hash "
                "of the code verifier, base64url-encoded.",
            )
        if params.resource is not None and not same_resource(params.resource, self.resource):
            raise AuthorizeError(
                "invalid_target",
                f"This server issues tokens only for {self.resource}; the resource {params.resource!r} "
                "is another one.",
            )
        pending = {
            "client_id": client.client_id,
            "redirect_uri": str(params.redirect_uri),
            "explicit": params.redirect_uri_provided_explicitly,
            "challenge": params.code_challenge,
            "state": params.state,
            "scopes": list(params.scopes or []),
        }
        signed = (await self.signed("request")).dumps(pending)
        return construct_redirect_uri(self.issuer.rstrip("/") + CONSENT_PATH, request=signed)

    async def approve(self, pending: dict[str, Any], key: ApiKey, project: str | None) -> str:
        """Issue a code for ``key`` (and ``project``); the client's redirect URI carrying it."""
        code = new_secret(CODE_PREFIX)
        grant = OAuthGrant(
            client_id=pending["client_id"],
            org=key.org,
            key_id=key.id,
            project=project,
            resource=self.resource,
            scopes=tuple(pending["scopes"]),
        )
        row = OAuthCode(
            grant=grant,
            redirect_uri=pending["redirect_uri"],
            redirect_uri_explicit=bool(pending["explicit"]),
            code_challenge=pending["challenge"],
            expires_at=datetime.fromtimestamp(time.time() + CODE_TTL_S, UTC),
            used=False,
        )
        await self._store(self.keys.oauth.prune, datetime.now(UTC))
        await self._store(self.keys.oauth.add_code, secret_digest(code), row)
        return construct_redirect_uri(
            pending["redirect_uri"], code=code, state=pending["state"], iss=self.issuer
        )

    def deny(self, pending: dict[str, Any]) -> str:
        return construct_redirect_uri(
            pending["redirect_uri"],
            error="access_denied",
            error_description="The person declined to connect this client to Lore.",
            state=pending["state"],
            iss=self.issuer,
        )

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        if not authorization_code.startswith(CODE_PREFIX):
            return None
        hashed = secret_digest(authorization_code)
        row: OAuthCode | None = await self._store(self.keys.oauth.code, hashed)
        if row is None or row.grant.client_id != client.client_id:
            return None
        if row.used:  # a replay: refused, and the tokens the code gave are revoked
            await self._store(self.keys.oauth.use_code, hashed)
            return None
        return AuthorizationCode(
            code=authorization_code,
            scopes=list(row.grant.scopes),
            expires_at=row.expires_at.timestamp(),
            client_id=row.grant.client_id,
            code_challenge=row.code_challenge,
            redirect_uri=AnyUrl(row.redirect_uri),
            redirect_uri_provided_explicitly=row.redirect_uri_explicit,
            resource=row.grant.resource,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        hashed = secret_digest(authorization_code.code)
        row: OAuthCode | None = await self._store(self.keys.oauth.code, hashed)
        if row is None or not await self._store(self.keys.oauth.use_code, hashed):
            raise TokenError("invalid_grant", "This authorization code was already used; sign in again.")
        return await self._issue(row.grant, family=hashed)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        if not refresh_token.startswith(REFRESH_PREFIX):
            return None
        hashed = secret_digest(refresh_token)
        row: OAuthTokenRow | None = await self._store(self.keys.oauth.token, hashed)
        if row is None or row.kind != "refresh" or row.grant.client_id != client.client_id:
            return None
        if row.revoked:  # a rotated token presented again: the whole family is revoked
            await self._store(self.keys.oauth.use_refresh, hashed)
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=row.grant.client_id,
            scopes=list(row.grant.scopes),
            expires_at=int(row.expires_at.timestamp()),
            resource=row.grant.resource,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        hashed = secret_digest(refresh_token.token)
        row: OAuthTokenRow | None = await self._store(self.keys.oauth.token, hashed)
        if row is None or not await self._store(self.keys.oauth.use_refresh, hashed):
            raise TokenError("invalid_grant", "This refresh token was already used; sign in again.")
        grant = OAuthGrant(**{**row.grant.__dict__, "scopes": tuple(scopes)})
        return await self._issue(grant, family=row.family)

    async def _issue(self, grant: OAuthGrant, *, family: str) -> OAuthToken:
        if await self.verifier.live_key(grant) is None:
            raise TokenError("invalid_grant", "The Lore API key that approved this client was revoked.")
        access, refresh = new_secret(ACCESS_PREFIX), new_secret(REFRESH_PREFIX)
        for secret, kind, ttl_s in (
            (access, "access", ACCESS_TOKEN_TTL_S),
            (refresh, "refresh", REFRESH_TOKEN_TTL_S),
        ):
            expires_at = datetime.fromtimestamp(time.time() + ttl_s, UTC)
            row = OAuthTokenRow(kind=kind, family=family, grant=grant, expires_at=expires_at, revoked=False)
            await self._store(self.keys.oauth.add_token, secret_digest(secret), row)
        return OAuthToken(
            access_token=access,
            expires_in=ACCESS_TOKEN_TTL_S,
            refresh_token=refresh,
            scope=" ".join(grant.scopes) or None,
        )

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "This server issues tokens only through its consent page.")

    async def load_access_token(self, token: str) -> AccessToken | None:
        return await self.verifier.verify_token(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """Revoke the token and every other token of its authorization."""
        row: OAuthTokenRow | None = await self._store(self.keys.oauth.token, secret_digest(token.token))
        if row is not None:
            await self._store(self.keys.oauth.revoke_family, row.family)
