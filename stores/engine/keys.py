"""Orgs and API keys over the one SQL layer for both backends: a store sees only a key's SHA-256
digest and display prefix, and lookup by digest is the one query before an org is known."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from stores.engine.activity import ActivityNote
from stores.engine.activity_rows import ActivityLog
from stores.engine.lessons import Scope
from stores.engine.oauth_rows import OAuthDb, OAuthStore
from stores.engine.sql import SqlTx
from stores.errors import ConflictError, NotFoundError
from stores.ids import new_id


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


_KEY_COLUMNS = "id, org_id, name, key_prefix, project, is_root, created_at, last_used_at, revoked_at"
_KEY_TIMES = ("created_at", "last_used_at", "revoked_at")


class KeyDb(OAuthDb, Protocol):
    """What the key store needs of a backend (its ``ActivityDb`` too)."""

    def touching(self, org_id: str) -> contextlib.AbstractContextManager[SqlTx | None]:
        """A write recording a key's use, or None when the backend skips it (writer busy)."""


class KeyStore:
    """Orgs and keys. Raises ``NotFoundError``, ``ConflictError`` and ``UnavailableError``."""

    def __init__(self, db: KeyDb, activity: ActivityLog | None = None) -> None:
        self._db = db
        self.oauth = OAuthStore(db)  # OAuth clients, codes and tokens, each token bound to one of these keys
        self._activity = activity

    def create_org(self, org_id: str, name: str) -> Org:
        """``ConflictError`` when an org with this id exists."""
        with self._db.scoped(org_id, write=True) as tx:
            rows = tx.rows(
                "INSERT INTO orgs (id, name, created_at) VALUES (:id, :name, :now) "
                "ON CONFLICT (id) DO NOTHING RETURNING id, name, created_at",
                {"id": org_id, "name": name, "now": tx.stamp(datetime.now(UTC))},
            )
            if not rows:
                raise ConflictError(f"An org with id {org_id!r} already exists.")
            return _org(tx, rows[0])

    def get_org(self, org_id: str) -> Org | None:
        with self._db.scoped(org_id, write=False) as tx:
            rows = tx.rows("SELECT id, name, created_at FROM orgs WHERE id = :id", {"id": org_id})
            return _org(tx, rows[0]) if rows else None

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
        """A new key; ``activity`` is logged in the same transaction, naming ``created:<id>``."""
        with self._db.scoped(org_id, write=True) as tx:
            if not tx.rows("SELECT 1 FROM orgs WHERE id = :id", {"id": org_id}):
                raise NotFoundError(f"There is no org with id {org_id!r}; create it first.")
            rows = tx.rows(
                "INSERT INTO api_keys (id, org_id, name, key_hash, key_prefix, project, is_root, created_at) "
                "VALUES (:id, :org, :name, :hash, :prefix, :project, :root, :now) "
                f"ON CONFLICT (key_hash) DO NOTHING RETURNING {_KEY_COLUMNS}",
                {
                    "id": new_id(),
                    "org": org_id,
                    "name": name,
                    "hash": key_hash,
                    "prefix": prefix,
                    "project": project,
                    "root": root,
                    "now": tx.stamp(datetime.now(UTC)),
                },
            )
            if not rows:
                # The digest is unique across every org (the other org's row may be invisible here).
                raise ConflictError("A key with this digest is already stored; generate a new key.")
            key = _key(tx, rows[0])
            self._log(tx, org_id, activity, f"created:{key.id}")
            return key

    def key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The key with this digest, revoked or not."""
        with self._db.lookup(key_hash) as tx:
            found = _keys(tx, "key_hash = :h", {"h": key_hash})
            return found[0] if found else None

    def key_by_id(self, org_id: str, key_id: str) -> ApiKey | None:
        with self._db.scoped(org_id, write=False) as tx:
            found = _keys(tx, "org_id = :org AND id = :id", {"org": org_id, "id": key_id})
            return found[0] if found else None

    def list_keys(self, org_id: str) -> list[ApiKey]:
        """Every key of the org, revoked ones included, oldest first."""
        with self._db.scoped(org_id, write=False) as tx:
            return _keys(tx, "org_id = :org ORDER BY created_at, id", {"org": org_id})

    def revoke_key(
        self, org_id: str, key_id: str, *, activity: tuple[str, ActivityNote] | None = None
    ) -> ApiKey:
        """Idempotent (the first time stays); ``NotFoundError`` for no such key; logs ``revoked:<id>``."""
        with self._db.scoped(org_id, write=True) as tx:
            rows = tx.rows(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, :now) "
                f"WHERE org_id = :org AND id = :id RETURNING {_KEY_COLUMNS}",
                {"now": tx.stamp(datetime.now(UTC)), "org": org_id, "id": key_id},
            )
            if not rows:
                raise NotFoundError(f"Org {org_id!r} has no key with id {key_id!r}.")
            self._log(tx, org_id, activity, f"revoked:{key_id}")
            return _key(tx, rows[0])

    def _log(self, tx: SqlTx, org_id: str, activity: tuple[str, ActivityNote] | None, target: str) -> None:
        """A key change's entry, logged in the change's transaction."""
        if activity is None:
            return
        if self._activity is None:
            raise AssertionError("this key store was made without the store's activity log")
        project, note = activity
        self._activity.append(tx, Scope(org_id, project), dataclasses.replace(note, target=target))

    def touch_key(self, org_id: str, key_id: str, when: datetime) -> None:
        """Record use at ``when`` (gone: no error), never earlier, so racing requests never move it back."""
        with self._db.touching(org_id) as tx:
            if tx is not None:
                tx.rows(
                    "UPDATE api_keys SET last_used_at = :when WHERE org_id = :org AND id = :id "
                    "AND (last_used_at IS NULL OR last_used_at < :when)",
                    {"when": tx.stamp(when), "org": org_id, "id": key_id},
                )


def _org(tx: SqlTx, row: Mapping[str, Any]) -> Org:
    return Org(id=row["id"], name=row["name"], created_at=tx.time(row["created_at"]))


def _keys(tx: SqlTx, where: str, params: Mapping[str, Any]) -> list[ApiKey]:
    """The keys of the rows ``where`` picks (an ``ORDER BY`` may follow it)."""
    return [_key(tx, row) for row in tx.rows(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE {where}", params)]


def _key(tx: SqlTx, row: Mapping[str, Any]) -> ApiKey:
    times: dict[str, Any] = {name: tx.time(row[name]) if row[name] else None for name in _KEY_TIMES}
    return ApiKey(
        **{name: row[name] for name in ("id", "name", "project")},
        org=row["org_id"],
        prefix=row["key_prefix"],
        root=bool(row["is_root"]),
        **times,
    )
