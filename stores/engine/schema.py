"""Tables both backends make alike, written once with each dialect's names for the column types.

Structured memory, history, orgs and API keys have the same columns on both; only the type
names differ (``Types``). The text each dialect gets is exactly what its migration said when
it was written apart, so no database that ran it sees a change.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Types:
    """A dialect's names: column types, an auto-numbered key, a true/false column, and what
    follows a table whose rows are found by their primary key."""

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
        ){t.keyed};
        """


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
        CREATE INDEX api_keys_org_created ON api_keys (org_id, created_at);
        """
