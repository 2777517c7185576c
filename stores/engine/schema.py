"""Both backends' migration runner, and the tables they make alike.

The runner records each step it runs in the caller's (locked) transaction, so re-running is harmless,
and refuses a newer Lore's database untouched. Shared tables are written once with each dialect's
type names (``Types``), each the text its migration had when written apart: no database sees a change."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stores.engine.sql import SqlTx
from stores.errors import refuse_newer_schema

Migration = tuple[int, str, Any]


def apply_pending(
    tx: SqlTx,
    migrations: Sequence[Migration],
    schema_version: int,
    run: Callable[[Any], object],
    *,
    before_pending: Callable[[], None] | None = None,
) -> list[Migration]:
    """Run and record pending migrations, returning them; ``before_pending`` runs first if any."""
    applied = {row["version"] for row in tx.rows("SELECT version FROM schema_migrations", {})}
    refuse_newer_schema(applied, schema_version)
    pending = [m for m in migrations if m[0] not in applied]
    if pending and before_pending is not None:
        before_pending()
    for version, name, step in pending:
        run(step)
        tx.rows(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :at)",
            {"v": version, "n": name, "at": tx.stamp(datetime.now(UTC))},
        )
    return pending


@dataclass(frozen=True)
class Types:
    """A dialect's names for column types, keys, booleans and primary-key-only tables."""

    text: str
    integer: str
    json: str
    time: str
    serial: str
    flag: str
    keyed: str


def structured_tables(t: Types) -> str:
    """Migration 2: tables (``mem_tables``, ``mem_rows``), commits and snapshots."""
    return f"""
        CREATE TABLE mem_tables (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, name {t.text} NOT NULL,
            columns {t.json} NOT NULL, next_id {t.integer} NOT NULL,
            PRIMARY KEY (org_id, project, name)
        ){t.keyed};
        CREATE TABLE mem_rows (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, table_name {t.text} NOT NULL, row_id {t.integer} NOT NULL,
            data {t.json} NOT NULL,
            PRIMARY KEY (org_id, project, table_name, row_id)
        ){t.keyed};
        CREATE TABLE commits (
            pk {t.serial},
            id {t.text} NOT NULL UNIQUE,
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, seq {t.integer} NOT NULL,
            parent {t.text}, kind {t.text} NOT NULL, message {t.text} NOT NULL, actor {t.text} NOT NULL,
            created_at {t.time} NOT NULL, schema_hash_before {t.text} NOT NULL, schema_hash_after {t.text} NOT NULL,
            effects {t.json} NOT NULL,
            UNIQUE (org_id, project, seq)
        );
        CREATE TABLE commit_targets (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, target {t.text} NOT NULL, seq {t.integer} NOT NULL,
            PRIMARY KEY (org_id, project, target, seq)
        ){t.keyed};
        CREATE TABLE snapshots (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, seq {t.integer} NOT NULL, state {t.json} NOT NULL,
            PRIMARY KEY (org_id, project, seq)
        ){t.keyed};"""


def key_tables(t: Types) -> str:
    """Migration 3: orgs and API keys."""
    return f"""
        CREATE TABLE orgs (id {t.text} PRIMARY KEY, name {t.text} NOT NULL, created_at {t.time} NOT NULL);
        CREATE TABLE api_keys (
            id {t.text} PRIMARY KEY,
            org_id {t.text} NOT NULL REFERENCES orgs (id),
            name {t.text} NOT NULL,
            key_hash {t.text} NOT NULL UNIQUE,
            key_prefix {t.text} NOT NULL,
            project {t.text} NULL,
            is_root {t.flag},
            created_at {t.time} NOT NULL,
            last_used_at {t.time},
            revoked_at {t.time}
        );
        CREATE INDEX api_keys_org_created ON api_keys (org_id, created_at);"""


def oauth_tables(t: Types) -> str:
    """OAuth state, no RLS (read before an org is known); ``IF NOT EXISTS``: a wound-back file keeps it."""
    return f"""
        CREATE TABLE IF NOT EXISTS oauth_clients (
            client_id {t.text} PRIMARY KEY, metadata {t.json} NOT NULL, created_at {t.time} NOT NULL
        );
        CREATE TABLE IF NOT EXISTS oauth_codes (
            code_hash {t.text} PRIMARY KEY,
            client_id {t.text} NOT NULL, org_id {t.text} NOT NULL, key_id {t.text} NOT NULL,
            project {t.text}, resource {t.text} NOT NULL, scopes {t.text} NOT NULL,
            redirect_uri {t.text} NOT NULL, redirect_explicit {t.flag},
            code_challenge {t.text} NOT NULL, expires_at {t.time} NOT NULL, used_at {t.time}
        );
        CREATE INDEX IF NOT EXISTS oauth_codes_expiry ON oauth_codes (expires_at);
        CREATE TABLE IF NOT EXISTS oauth_tokens (
            token_hash {t.text} PRIMARY KEY,
            kind {t.text} NOT NULL, family {t.text} NOT NULL,
            client_id {t.text} NOT NULL, org_id {t.text} NOT NULL, key_id {t.text} NOT NULL,
            project {t.text}, resource {t.text} NOT NULL, scopes {t.text} NOT NULL,
            expires_at {t.time} NOT NULL, revoked_at {t.time}, created_at {t.time} NOT NULL
        );
        CREATE INDEX IF NOT EXISTS oauth_tokens_family ON oauth_tokens (family);
        CREATE INDEX IF NOT EXISTS oauth_tokens_expiry ON oauth_tokens (expires_at);
        CREATE TABLE IF NOT EXISTS oauth_secrets (name {t.text} PRIMARY KEY, value {t.text} NOT NULL)"""


def oauth_registration_table(t: Types) -> str:
    """Clients' address, time and first token, for the unused-client cap (older ones: no row)."""
    return f"""
        CREATE TABLE IF NOT EXISTS oauth_registrations (
            client_id {t.text} PRIMARY KEY, address {t.text} NOT NULL,
            registered_at {t.time} NOT NULL, used_at {t.time}
        );
        CREATE INDEX IF NOT EXISTS oauth_registrations_address ON oauth_registrations (address, registered_at)
        """


def curation_tables(t: Types) -> str:
    """Pairs kept apart (never relisted), and whether an entry was a person's (not a recall)."""
    return f"""
        CREATE TABLE IF NOT EXISTS kept_pairs (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, a {t.text} NOT NULL, b {t.text} NOT NULL,
            at {t.time} NOT NULL, actor {t.text} NOT NULL,
            PRIMARY KEY (org_id, project, a, b)
        ){t.keyed}"""


def person_column(t: Types) -> str:
    """``activity.person``, only where missing: SQLite lacks ``ADD COLUMN IF NOT EXISTS``."""
    return f"person {t.flag}"


def activity_tables(t: Types) -> str:
    """The activity log: entries by ULID (order and time bounds), and a row per lesson named, with
    kind and time, so recalls count on an index. ``IF NOT EXISTS`` as for OAuth."""
    return f"""
        CREATE TABLE IF NOT EXISTS activity (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, id {t.text} NOT NULL,
            at {t.time} NOT NULL, kind {t.text} NOT NULL, key_id {t.text}, client {t.text},
            commit_id {t.text}, error {t.text}, detail {t.json} NOT NULL,
            PRIMARY KEY (org_id, project, id)
        ){t.keyed};
        CREATE TABLE IF NOT EXISTS activity_lessons (
            org_id {t.text} NOT NULL, project {t.text} NOT NULL, lesson_id {t.text} NOT NULL,
            entry_id {t.text} NOT NULL, kind {t.text} NOT NULL, at {t.time} NOT NULL,
            PRIMARY KEY (org_id, project, lesson_id, entry_id)
        ){t.keyed};
        CREATE INDEX IF NOT EXISTS activity_lessons_entry ON activity_lessons (org_id, project, entry_id)"""
