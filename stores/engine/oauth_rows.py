"""OAuth clients, authorization codes and tokens over the one SQL layer, written once.

Codes and tokens are stored as SHA-256 digests, each naming the API key entered on the consent page,
so a revoked key's tokens are refused; an authorization's tokens share a ``family``, all revoked when
a used code or rotated refresh token is replayed. Clients and the signing secret precede any sign-in,
so they live under ``NO_ORG`` without RLS."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from stores.engine.sql import SqlTx

NO_ORG = ""  # the scope of a transaction that touches no org's rows (clients, the signing secret)


@dataclass(frozen=True)
class OAuthGrant:
    """What a person approved: this client may act with this key, in its org (and project)."""

    client_id: str
    org: str
    key_id: str
    project: str | None  # None: every project the key reaches
    resource: str  # the MCP endpoint the tokens are for (RFC 8707)
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class OAuthCode:
    """An authorization code, as the token endpoint needs it."""

    grant: OAuthGrant
    redirect_uri: str
    redirect_uri_explicit: bool
    code_challenge: str
    expires_at: datetime
    used: bool


@dataclass(frozen=True)
class OAuthTokenRow:
    """An access or refresh token (its digest is the row's key)."""

    kind: str  # "access" or "refresh"
    family: str
    grant: OAuthGrant
    expires_at: datetime
    revoked: bool


class OAuthDb(Protocol):
    """The transactions the OAuth rows need (``stores.engine.keys.KeyDb`` has them)."""

    def scoped(self, org_id: str, *, write: bool) -> contextlib.AbstractContextManager[SqlTx]:
        """A transaction that may see and change ``org_id``'s rows (``NO_ORG``: clients, secrets)."""

    def lookup(self, key_hash: str) -> contextlib.AbstractContextManager[SqlTx]:
        """A read that may see the one row with this digest, whatever its org."""


_GRANT_COLUMNS = "client_id, org_id, key_id, project, resource, scopes"
_TOKEN_COLUMNS = f"kind, family, {_GRANT_COLUMNS}, expires_at, revoked_at"
_CODE_COLUMNS = f"{_GRANT_COLUMNS}, redirect_uri, redirect_explicit, code_challenge, expires_at, used_at"


class OAuthStore:
    """One store's OAuth state; ``UnavailableError`` when the database cannot be asked."""

    def __init__(self, db: OAuthDb) -> None:
        self._db = db

    def save_client(self, client_id: str, metadata: Mapping[str, Any]) -> None:
        """A registered client's metadata (RFC 7591), replacing what was stored under its id."""
        with self._db.scoped(NO_ORG, write=True) as tx:
            self._insert_client(tx, client_id, metadata, datetime.now(UTC))

    @staticmethod
    def _insert_client(tx: SqlTx, client_id: str, metadata: Mapping[str, Any], now: datetime) -> None:
        tx.rows(
            f"INSERT INTO oauth_clients (client_id, metadata, created_at) VALUES (:id, {tx.json('m')}, :now) "
            "ON CONFLICT (client_id) DO UPDATE SET metadata = excluded.metadata",
            {"id": client_id, "m": tx.dump(dict(metadata)), "now": tx.stamp(now)},
        )

    def register_client(
        self,
        client_id: str,
        metadata: Mapping[str, Any],
        address: str,
        now: datetime,
        cap: int,
        unused_for: timedelta,
    ) -> float | None:
        """Record a client unless ``address`` has ``cap`` unused ones (then the seconds until its
        oldest is forgotten), first forgetting clients unused after ``unused_for``."""
        with self._db.scoped(NO_ORG, write=True) as tx:
            stale = {"cutoff": tx.stamp(now - unused_for)}
            unused = "FROM oauth_registrations WHERE used_at IS NULL AND registered_at < :cutoff"
            tx.rows(f"DELETE FROM oauth_clients WHERE client_id IN (SELECT client_id {unused})", stale)
            tx.rows(f"DELETE {unused}", stale)
            held = tx.rows(
                "SELECT count(*) AS n, min(registered_at) AS oldest FROM oauth_registrations "
                "WHERE address = :address AND used_at IS NULL",
                {"address": address},
            )[0]
            if held["n"] >= cap:
                return max(0.0, (tx.time(held["oldest"]) + unused_for - now).total_seconds())
            self._insert_client(tx, client_id, metadata, now)
            tx.rows(
                "INSERT INTO oauth_registrations (client_id, address, registered_at, used_at) "
                "VALUES (:id, :address, :now, NULL)",
                {"id": client_id, "address": address, "now": tx.stamp(now)},
            )
            return None

    def client(self, client_id: str) -> dict[str, Any] | None:
        with self._db.lookup(NO_ORG) as tx:
            rows = tx.rows("SELECT metadata FROM oauth_clients WHERE client_id = :id", {"id": client_id})
            return dict(tx.load(rows[0]["metadata"])) if rows else None

    def add_code(self, code_hash: str, code: OAuthCode) -> None:
        with self._db.scoped(code.grant.org, write=True) as tx:
            tx.rows(
                f"INSERT INTO oauth_codes (code_hash, {_CODE_COLUMNS}) VALUES (:hash, :client_id, :org_id, "
                ":key_id, :project, :resource, :scopes, :redirect_uri, :explicit, :challenge, :expires, NULL)",
                {
                    "hash": code_hash,
                    **_grant_params(code.grant),
                    "redirect_uri": code.redirect_uri,
                    "explicit": code.redirect_uri_explicit,
                    "challenge": code.code_challenge,
                    "expires": tx.stamp(code.expires_at),
                },
            )

    def code(self, code_hash: str) -> OAuthCode | None:
        """The code with this digest, used or not."""
        with self._db.lookup(code_hash) as tx:
            rows = tx.rows(f"SELECT {_CODE_COLUMNS} FROM oauth_codes WHERE code_hash = :h", {"h": code_hash})
            if not rows:
                return None
            row = rows[0]
            return OAuthCode(
                grant=_grant(row),
                redirect_uri=row["redirect_uri"],
                redirect_uri_explicit=bool(row["redirect_explicit"]),
                code_challenge=row["code_challenge"],
                expires_at=tx.time(row["expires_at"]),
                used=row["used_at"] is not None,
            )

    def use_code(self, code_hash: str) -> bool:
        """Mark the code used; False when it already was (a replay), which revokes its tokens."""
        with self._db.scoped(NO_ORG, write=True) as tx:
            used = tx.rows(
                "UPDATE oauth_codes SET used_at = :now WHERE code_hash = :h AND used_at IS NULL RETURNING code_hash",
                {"now": tx.stamp(datetime.now(UTC)), "h": code_hash},
            )
            if not used:
                _revoke_family(tx, code_hash)
            return bool(used)

    def add_token(self, token_hash: str, token: OAuthTokenRow) -> None:
        with self._db.scoped(token.grant.org, write=True) as tx:
            tx.rows(
                f"INSERT INTO oauth_tokens (token_hash, {_TOKEN_COLUMNS}, created_at) VALUES (:hash, :kind, "
                ":family, :client_id, :org_id, :key_id, :project, :resource, :scopes, :expires, NULL, :now)",
                {
                    "hash": token_hash,
                    "kind": token.kind,
                    "family": token.family,
                    **_grant_params(token.grant),
                    "expires": tx.stamp(token.expires_at),
                    "now": tx.stamp(datetime.now(UTC)),
                },
            )
            tx.rows(  # the client is in use: no longer counted against its address, never expired
                "UPDATE oauth_registrations SET used_at = :now WHERE client_id = :id AND used_at IS NULL",
                {"now": tx.stamp(datetime.now(UTC)), "id": token.grant.client_id},
            )

    def token(self, token_hash: str) -> OAuthTokenRow | None:
        """The token with this digest, revoked or expired ones included."""
        with self._db.lookup(token_hash) as tx:
            rows = tx.rows(
                f"SELECT {_TOKEN_COLUMNS} FROM oauth_tokens WHERE token_hash = :h", {"h": token_hash}
            )
            if not rows:
                return None
            row = rows[0]
            return OAuthTokenRow(
                kind=row["kind"],
                family=row["family"],
                grant=_grant(row),
                expires_at=tx.time(row["expires_at"]),
                revoked=row["revoked_at"] is not None,
            )

    def use_refresh(self, token_hash: str) -> bool:
        """Revoke a refresh token as it is exchanged; False for a replay, which revokes its family."""
        with self._db.scoped(NO_ORG, write=True) as tx:
            used = tx.rows(
                "UPDATE oauth_tokens SET revoked_at = :now WHERE token_hash = :h AND kind = 'refresh' "
                "AND revoked_at IS NULL RETURNING family",
                {"now": tx.stamp(datetime.now(UTC)), "h": token_hash},
            )
            if used:
                return True
            replayed = tx.rows("SELECT family FROM oauth_tokens WHERE token_hash = :h", {"h": token_hash})
            for row in replayed:
                _revoke_family(tx, row["family"])
            return False

    def revoke_family(self, family: str) -> None:
        with self._db.scoped(NO_ORG, write=True) as tx:
            _revoke_family(tx, family)

    def secret(self, name: str, candidate: str) -> str:
        """Secret ``name``, storing ``candidate`` if none, so every replica signs with the same."""
        with self._db.scoped(NO_ORG, write=True) as tx:
            tx.rows(
                "INSERT INTO oauth_secrets (name, value) VALUES (:name, :value) ON CONFLICT (name) DO NOTHING",
                {"name": name, "value": candidate},
            )
            found = tx.rows("SELECT value FROM oauth_secrets WHERE name = :name", {"name": name})
            return str(found[0]["value"])

    def prune(self, now: datetime) -> None:
        """Forget codes and tokens that expired before ``now``."""
        with self._db.scoped(NO_ORG, write=True) as tx:
            tx.rows("DELETE FROM oauth_codes WHERE expires_at < :now", {"now": tx.stamp(now)})
            tx.rows("DELETE FROM oauth_tokens WHERE expires_at < :now", {"now": tx.stamp(now)})


def _revoke_family(tx: SqlTx, family: str) -> None:
    tx.rows(
        "UPDATE oauth_tokens SET revoked_at = :now WHERE family = :family AND revoked_at IS NULL",
        {"now": tx.stamp(datetime.now(UTC)), "family": family},
    )


# A grant's fields and their columns (scopes apart: one text of names).
_GRANT = {"org": "org_id"} | {name: name for name in ("client_id", "key_id", "project", "resource")}


def _grant_params(grant: OAuthGrant) -> dict[str, Any]:
    return {column: getattr(grant, name) for name, column in _GRANT.items()} | {
        "scopes": " ".join(grant.scopes)
    }


def _grant(row: Mapping[str, Any]) -> OAuthGrant:
    return OAuthGrant(
        **{name: row[column] for name, column in _GRANT.items()}, scopes=tuple(row["scopes"].split())
    )
