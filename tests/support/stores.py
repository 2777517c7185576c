"""Opening and emptying the stores the suite runs against."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stores import Store, open_local_store, open_postgres_store


def embedding_storage(url: str) -> str:
    """The vector column's storage: ``m`` (MAIN) keeps vectors in their rows, out of TOAST."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        sql = "SELECT attstorage FROM pg_attribute WHERE attrelid = 'lessons'::regclass AND attname = 'embedding'"
        return str(conn.execute(sql).fetchone()[0])


def empty_postgres(url: str) -> None:
    """Remove every row Lore stored, keeping the schema (faster than a new database per test)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('lessons') IS NOT NULL").fetchone()[0]
        if exists:
            conn.execute(
                "TRUNCATE lessons, mem_tables, mem_rows, commits, commit_targets, snapshots RESTART IDENTITY"
            )
            # Projects' own vector indexes (stores.postgres.project_index): their scans are counted.
            for index in own_indexes(url):
                conn.execute(f'DROP INDEX "{index}"')
            # The embedding model a test recorded (stores.engine.embedding_model): the next test's may differ.
            conn.execute("DELETE FROM lore_meta WHERE key IN ('model', 'model_generation', 'reembed_target')")
            if conn.execute("SELECT to_regclass('lesson_reembed') IS NOT NULL").fetchone()[0]:
                conn.execute("TRUNCATE lesson_reembed")
            # The activity log (migration 11): a test's log starts empty.
            if conn.execute("SELECT to_regclass('activity') IS NOT NULL").fetchone()[0]:
                conn.execute("TRUNCATE activity, activity_lessons")
            # Tool calls counted per key (migration 10): a test's limit starts from nothing.
            if conn.execute("SELECT to_regclass('call_counts') IS NOT NULL").fetchone()[0]:
                conn.execute("TRUNCATE call_counts")
            # Who registered each OAuth client (migration 12): a test's address has registered nothing.
            if conn.execute("SELECT to_regclass('oauth_registrations') IS NOT NULL").fetchone()[0]:
                conn.execute("TRUNCATE oauth_registrations")
        # Orgs and keys came with migration 3; a database still at 2 has none to remove.
        if conn.execute("SELECT to_regclass('api_keys') IS NOT NULL").fetchone()[0]:
            conn.execute("TRUNCATE api_keys, orgs")


def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    """A fresh, empty store of the given backend."""
    if backend == "local":
        return open_local_store(tmp_path / "lore.db")
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
        empty_postgres(url)
        return open_postgres_store(url)
    raise ValueError(f"unknown backend {backend}")


def database_per_worker(url: str, worker: str | None) -> str:
    """``url`` itself when the tests run in one process; under pytest-xdist, a database of
    the worker's own (``<name>_gw0``…) on the same server, created on first use."""
    if worker is None:
        return url
    import psycopg
    from sqlalchemy.engine import make_url

    if not re.fullmatch(r"gw\d+", worker):
        raise ValueError(f"unexpected pytest-xdist worker id {worker!r}")
    base = make_url(url)
    name = f"{base.database}_{worker}"
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')  # the configured name and a checked worker id
    return base.set(database=name).render_as_string(hide_password=False)


def own_indexes(url: str) -> dict[str, tuple[bool, int]]:
    """Each project's own vector index (``stores.postgres.project_index``): valid, and scans served."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid, s.idx_scan FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_stat_user_indexes s ON s.indexrelid = i.indexrelid WHERE c.relname LIKE 'lessons_embedding_%'"
        ).fetchall()
    return {name: (valid, scans) for name, valid, scans in rows}


def until(check: Callable[[], Any], what: str) -> Any:
    """``check()`` once it is truthy: a background index build, statistics reaching other sessions
    within a second or so of a transaction; a minute is far beyond either."""
    deadline = time.monotonic() + 60
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found
