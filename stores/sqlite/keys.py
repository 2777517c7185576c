"""Orgs and API keys in the local SQLite file: ``stores.engine.keys.KeyStore``.

Shares the lesson store's two connections and their locks, so key writes queue
behind lesson writes in the same ``BEGIN IMMEDIATE`` discipline and never
contend with the process's own lesson traffic. ``LocalLessonStore.keys`` hands
them over explicitly, so this module needs nothing of the lesson store's.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import sqlean

from stores import deadline
from stores.engine.keys import ApiKey, Org
from stores.errors import ConflictError, NotFoundError, UnavailableError
from stores.ids import new_id
from stores.sqlite.db import Connection, format_ts, parse_ts, utc_now, write_transaction

# The longest recording a key's use waits for another process's write lock.
TOUCH_WAIT_S = 0.2
_KEY_COLUMNS = "id, org, name, key_prefix, project, is_root, created_at, last_used_at, revoked_at"


class LocalKeyStore:
    """``stores.engine.keys.KeyStore`` on the SQLite file of a ``LocalLessonStore``, through its
    writer and reader connections and the locks that guard them."""

    def __init__(
        self, writer: Connection, reader: Connection, write_lock: threading.Lock, read_lock: threading.Lock
    ) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = write_lock
        self._read_lock = read_lock

    def create_org(self, org_id: str, name: str) -> Org:
        now = utc_now()
        with self._write_lock, write_transaction(self._writer) as conn:
            cur = conn.execute(
                "INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (org_id, name, format_ts(now)),
            )
            if cur.rowcount == 0:
                raise ConflictError(f"An org with id {org_id!r} already exists.")
        return Org(id=org_id, name=name, created_at=parse_ts(format_ts(now)))

    def get_org(self, org_id: str) -> Org | None:
        with self._read_lock:
            row = self._reader.execute(
                "SELECT id, name, created_at FROM orgs WHERE id = ?", (org_id,)
            ).fetchone()
        if row is None:
            return None
        return Org(id=row[0], name=row[1], created_at=parse_ts(row[2]))

    def add_key(
        self, org_id: str, *, name: str, key_hash: str, prefix: str, project: str | None, root: bool
    ) -> ApiKey:
        key_id = new_id()
        with self._write_lock, write_transaction(self._writer) as conn:
            if conn.execute("SELECT 1 FROM orgs WHERE id = ?", (org_id,)).fetchone() is None:
                raise NotFoundError(f"There is no org with id {org_id!r}; create it first.")
            cur = conn.execute(
                "INSERT INTO api_keys (id, org, name, key_hash, key_prefix, project, is_root, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key_hash) DO NOTHING",
                (key_id, org_id, name, key_hash, prefix, project, int(root), format_ts(utc_now())),
            )
            if cur.rowcount == 0:
                raise ConflictError("A key with this digest is already stored; generate a new key.")
            return self._key(conn, org_id, key_id)

    def key_by_hash(self, key_hash: str) -> ApiKey | None:
        # Authentication runs this on every request: a file that cannot be read is an
        # outage (UNAVAILABLE), never "no such key".
        try:
            with self._read_lock:
                row = self._reader.execute(
                    f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,)
                ).fetchone()
        except sqlean.OperationalError as exc:
            raise UnavailableError(
                f"The Lore database could not be read to check an API key: {exc}."
            ) from exc
        return _to_key(row) if row is not None else None

    def list_keys(self, org_id: str) -> list[ApiKey]:
        with self._read_lock:
            rows = self._reader.execute(
                f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE org = ? ORDER BY created_at, id", (org_id,)
            ).fetchall()
        return [_to_key(row) for row in rows]

    def revoke_key(self, org_id: str, key_id: str) -> ApiKey:
        with self._write_lock, write_transaction(self._writer) as conn:
            conn.execute(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE org = ? AND id = ?",
                (format_ts(utc_now()), org_id, key_id),
            )
            return self._key(conn, org_id, key_id)

    def touch_key(self, org_id: str, key_id: str, when: datetime) -> None:
        """Record a key's use, or skip it while the writer is taken: last-used is informative,
        and a key check must never queue behind another call's long write (a skipped touch is
        made by the key's next request)."""
        if not self._write_lock.acquire(blocking=False):
            return
        stamp = format_ts(when)
        try:
            with deadline.limit(TOUCH_WAIT_S), write_transaction(self._writer) as conn:
                conn.execute(
                    "UPDATE api_keys SET last_used_at = ? WHERE org = ? AND id = ? "
                    "AND (last_used_at IS NULL OR last_used_at < ?)",
                    (stamp, org_id, key_id, stamp),
                )
        except deadline.DeadlineExceeded:
            pass  # another process holds the file's write lock
        finally:
            self._write_lock.release()

    def _key(self, conn: Connection, org_id: str, key_id: str) -> ApiKey:
        row = conn.execute(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE org = ? AND id = ?", (org_id, key_id)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"Org {org_id!r} has no key with id {key_id!r}.")
        return _to_key(row)


def _to_key(row: Any) -> ApiKey:
    return ApiKey(
        id=row[0],
        org=row[1],
        name=row[2],
        prefix=row[3],
        project=row[4],
        root=bool(row[5]),
        created_at=parse_ts(row[6]),
        last_used_at=parse_ts(row[7]) if row[7] else None,
        revoked_at=parse_ts(row[8]) if row[8] else None,
    )
