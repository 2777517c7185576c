"""The keys contract: orgs and API keys, as the team server's auth needs them.

A store never sees a raw key: the MCP layer generates keys and hands the store
only the SHA-256 hex digest and a short display prefix. Lookup by digest is the
one query that runs before an org is known; every other call names its org.

Both lesson stores expose their ``KeyStore`` as the property ``keys`` (the same
object on every access), on the same file or database as the lessons:
both are ``stores.engine.key_rows.SqlKeyStore``, over ``stores.sqlite.keys.LocalKeyDb``
(sharing the local store's connections and locks) or ``stores.postgres.keys.PostgresKeyDb``
(on its engine). ``stores.Store``, what
``stores.open_*_store`` returns, names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stores.engine.activity import ActivityNote
    from stores.engine.oauth_rows import OAuthStore


@dataclass(frozen=True)
class Org:
    """A tenant: every lesson, table, commit and key belongs to exactly one org."""

    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKey:
    """A stored API key, without its secret (only its digest is stored)."""

    id: str
    org: str
    name: str
    prefix: str
    project: str | None  # None: every project of the org
    root: bool
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyStore(Protocol):
    """Orgs and keys. Raises ``NotFoundError``, ``ConflictError`` and ``UnavailableError``."""

    def create_org(self, org_id: str, name: str) -> Org:
        """Create an org; ``ConflictError`` when one with this id exists."""
        ...

    def get_org(self, org_id: str) -> Org | None:
        """The org, or None when there is none with this id."""
        ...

    def add_key(
        self,
        org_id: str,
        *,
        name: str,
        key_hash: str,
        prefix: str,
        project: str | None,
        root: bool,
        activity: tuple[str, ActivityNote] | None = None,
    ) -> ApiKey:
        """Store a new key (its digest only); ``NotFoundError`` when the org does not exist.
        ``activity``: a project of the org and the call's entry, appended to that project's
        activity log in the same transaction, naming the key (``created:<id>``)."""
        ...

    def key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The key with this digest, revoked or not, or None."""
        ...

    def key_by_id(self, org_id: str, key_id: str) -> ApiKey | None:
        """The org's key with this id, revoked or not, or None."""
        ...

    @property
    def oauth(self) -> OAuthStore:
        """OAuth clients, codes and tokens, each token bound to one of these keys
        (``stores.engine.oauth_rows``), in the same file or database."""
        ...

    def list_keys(self, org_id: str) -> list[ApiKey]:
        """Every key of the org, revoked ones included, oldest first."""
        ...

    def revoke_key(
        self, org_id: str, key_id: str, *, activity: tuple[str, ActivityNote] | None = None
    ) -> ApiKey:
        """Mark a key revoked (idempotent: revoking twice keeps the first time);
        ``NotFoundError`` when the org has no key with this id. ``activity`` as for ``add_key``."""
        ...

    def touch_key(self, org_id: str, key_id: str, when: datetime) -> None:
        """Record that the key was used at ``when`` (no error when it is gone); a ``when``
        earlier than the time already recorded leaves it, so racing requests never move it back."""
        ...
