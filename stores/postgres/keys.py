"""Orgs and API keys in Postgres: ``stores.engine.keys.KeyStore``.

Every call but one names its org and sets ``lore.org`` for the row-level security
policies (see ``stores.postgres.db``). The exception is ``key_by_hash``, which runs
before the org is known: it sets ``lore.key_hash`` instead, and the ``api_keys_lookup``
policy lets it read exactly the one row with that digest and nothing else.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from stores.engine.keys import ApiKey, Org
from stores.errors import ConflictError, NotFoundError
from stores.ids import new_id
from stores.postgres.db import transaction

_KEY_COLUMNS = "id, org_id, name, key_prefix, project, is_root, created_at, last_used_at, revoked_at"


class PostgresKeyStore:
    """``stores.engine.keys.KeyStore`` on the engine of a ``PostgresLessonStore``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create_org(self, org_id: str, name: str) -> Org:
        with transaction(self._engine, org_id) as conn:
            row = conn.execute(
                text(
                    "INSERT INTO orgs (id, name, created_at) VALUES (:id, :name, :now) "
                    "ON CONFLICT (id) DO NOTHING RETURNING id, name, created_at"
                ),
                {"id": org_id, "name": name, "now": _now()},
            ).first()
        if row is None:
            raise ConflictError(f"An org with id {org_id!r} already exists.")
        return Org(id=row.id, name=row.name, created_at=_utc(row.created_at))

    def get_org(self, org_id: str) -> Org | None:
        with transaction(self._engine, org_id) as conn:
            row = conn.execute(
                text("SELECT id, name, created_at FROM orgs WHERE id = :id"), {"id": org_id}
            ).first()
        if row is None:
            return None
        return Org(id=row.id, name=row.name, created_at=_utc(row.created_at))

    def add_key(
        self, org_id: str, *, name: str, key_hash: str, prefix: str, project: str | None, root: bool
    ) -> ApiKey:
        try:
            with transaction(self._engine, org_id) as conn:
                if conn.execute(text("SELECT 1 FROM orgs WHERE id = :id"), {"id": org_id}).first() is None:
                    raise NotFoundError(f"There is no org with id {org_id!r}; create it first.")
                row = conn.execute(
                    text(
                        "INSERT INTO api_keys (id, org_id, name, key_hash, key_prefix, project, is_root, "
                        "created_at) VALUES (:id, :org, :name, :hash, :prefix, :project, :root, :now) "
                        f"RETURNING {_KEY_COLUMNS}"
                    ),
                    {
                        "id": new_id(),
                        "org": org_id,
                        "name": name,
                        "hash": key_hash,
                        "prefix": prefix,
                        "project": project,
                        "root": root,
                        "now": _now(),
                    },
                ).one()
        except IntegrityError as exc:
            # The digest is unique across every org; the other org's row stays invisible here.
            raise ConflictError("A key with this digest is already stored; generate a new key.") from exc
        return _to_key(row._mapping)

    def key_by_hash(self, key_hash: str) -> ApiKey | None:
        with transaction(self._engine, None) as conn:
            conn.execute(text("SELECT set_config('lore.key_hash', :h, true)"), {"h": key_hash})
            row = conn.execute(
                text(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = :h"), {"h": key_hash}
            ).first()
        return _to_key(row._mapping) if row is not None else None

    def list_keys(self, org_id: str) -> list[ApiKey]:
        with transaction(self._engine, org_id) as conn:
            rows = conn.execute(
                text(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE org_id = :org ORDER BY created_at, id"),
                {"org": org_id},
            ).all()
        return [_to_key(row._mapping) for row in rows]

    def revoke_key(self, org_id: str, key_id: str) -> ApiKey:
        with transaction(self._engine, org_id) as conn:
            row = conn.execute(
                text(
                    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, :now) "
                    f"WHERE org_id = :org AND id = :id RETURNING {_KEY_COLUMNS}"
                ),
                {"now": _now(), "org": org_id, "id": key_id},
            ).first()
        if row is None:
            raise NotFoundError(f"Org {org_id!r} has no key with id {key_id!r}.")
        return _to_key(row._mapping)

    def touch_key(self, org_id: str, key_id: str, when: datetime) -> None:
        with transaction(self._engine, org_id) as conn:
            conn.execute(
                text(
                    "UPDATE api_keys SET last_used_at = :when WHERE org_id = :org AND id = :id "
                    "AND (last_used_at IS NULL OR last_used_at < :when)"
                ),
                {"when": when, "org": org_id, "id": key_id},
            )


def _to_key(row: Any) -> ApiKey:
    return ApiKey(
        id=row["id"],
        org=row["org_id"],
        name=row["name"],
        prefix=row["key_prefix"],
        project=row["project"],
        root=bool(row["is_root"]),
        created_at=_utc(row["created_at"]),
        last_used_at=_utc(row["last_used_at"]) if row["last_used_at"] else None,
        revoked_at=_utc(row["revoked_at"]) if row["revoked_at"] else None,
    )


def _utc(dt: datetime) -> datetime:
    return dt.astimezone(UTC)


def _now() -> datetime:
    return datetime.now(UTC)
