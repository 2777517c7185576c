"""The keys contract (``stores.engine.keys``) on both backends: orgs, API keys, and their org boundary."""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from stores import ConflictError, NotFoundError, open_local_store, open_postgres_store
from stores.engine.keys import ApiKey, KeyStore
from stores.postgres.db import RLS_ROLE
from tests.support.stores import empty_postgres

T0 = datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def add(keys: KeyStore, org: str, secret: str, **overrides: object) -> ApiKey:
    fields: dict[str, object] = {
        "name": f"{secret} key",
        "prefix": secret[:8],
        "project": None,
        "root": False,
    }
    fields.update(overrides)
    return keys.add_key(org, key_hash=digest(secret), **fields)  # type: ignore[arg-type]


@pytest.fixture
def keys(store) -> KeyStore:
    return store.keys


def test_the_store_hands_out_one_key_store(store) -> None:
    assert store.keys is store.keys


def test_an_org_is_created_once(keys: KeyStore) -> None:
    before = datetime.now(UTC)
    org = keys.create_org("acme", "Acme Corp")
    assert (org.id, org.name) == ("acme", "Acme Corp")
    assert before - timedelta(seconds=1) <= org.created_at <= datetime.now(UTC)
    assert keys.get_org("acme") == org
    with pytest.raises(ConflictError):
        keys.create_org("acme", "Someone else")
    assert keys.get_org("acme") == org


def test_an_unknown_org_is_none(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    assert keys.get_org("globex") is None


def test_a_key_needs_its_org(keys: KeyStore) -> None:
    with pytest.raises(NotFoundError):
        add(keys, "nobody", "lore_sk_orphan")
    assert keys.key_by_hash(digest("lore_sk_orphan")) is None


def test_a_key_is_found_by_its_digest_with_every_field(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    before = datetime.now(UTC)
    scoped = add(keys, "acme", "lore_sk_scoped", name="ci bot", prefix="lore_sk_sc", project="web")
    root = add(keys, "acme", "lore_sk_root", name="admin", prefix="lore_sk_ro", root=True)

    assert scoped.id and scoped.id != root.id
    assert (scoped.org, scoped.name, scoped.prefix, scoped.project, scoped.root) == (
        "acme",
        "ci bot",
        "lore_sk_sc",
        "web",
        False,
    )
    assert before - timedelta(seconds=1) <= scoped.created_at <= datetime.now(UTC)
    assert scoped.last_used_at is None and scoped.revoked_at is None
    assert (root.project, root.root) == (None, True)

    assert keys.key_by_hash(digest("lore_sk_scoped")) == scoped
    assert keys.key_by_hash(digest("lore_sk_root")) == root


def test_an_unknown_digest_is_none(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    add(keys, "acme", "lore_sk_known")
    assert keys.key_by_hash(digest("lore_sk_unknown")) is None


def test_a_digest_is_stored_once_across_orgs(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    keys.create_org("globex", "Globex")
    first = add(keys, "acme", "lore_sk_same")
    with pytest.raises(ConflictError):
        add(keys, "globex", "lore_sk_same")
    assert keys.key_by_hash(digest("lore_sk_same")) == first
    assert keys.list_keys("globex") == []


def test_an_org_lists_only_its_own_keys_oldest_first(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    keys.create_org("globex", "Globex")
    a1 = add(keys, "acme", "lore_sk_a1")
    g1 = add(keys, "globex", "lore_sk_g1")
    a2 = add(keys, "acme", "lore_sk_a2", project="web")
    a2 = keys.revoke_key("acme", a2.id)
    a3 = add(keys, "acme", "lore_sk_a3", root=True)

    assert keys.list_keys("acme") == [a1, a2, a3]  # the revoked one included
    assert keys.list_keys("globex") == [g1]
    assert keys.list_keys("initech") == []


def test_revoking_keeps_the_first_time_and_stays_in_the_org(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    keys.create_org("globex", "Globex")
    key = add(keys, "acme", "lore_sk_a")
    other = add(keys, "globex", "lore_sk_g")

    before = datetime.now(UTC)
    revoked = keys.revoke_key("acme", key.id)
    assert revoked.revoked_at is not None
    assert before - timedelta(seconds=1) <= revoked.revoked_at <= datetime.now(UTC)
    assert revoked == ApiKey(**{**key.__dict__, "revoked_at": revoked.revoked_at})

    again = keys.revoke_key("acme", key.id)
    assert again.revoked_at == revoked.revoked_at
    assert keys.key_by_hash(digest("lore_sk_a")) == revoked  # still found: the caller refuses it

    with pytest.raises(NotFoundError):
        keys.revoke_key("acme", other.id)  # globex's key, named from acme
    with pytest.raises(NotFoundError):
        keys.revoke_key("acme", "01NOSUCHKEY0000000000000000")
    assert keys.key_by_hash(digest("lore_sk_g")) == other


def test_touching_a_key_records_its_last_use(keys: KeyStore) -> None:
    keys.create_org("acme", "Acme")
    keys.create_org("globex", "Globex")
    key = add(keys, "acme", "lore_sk_a")
    other = add(keys, "globex", "lore_sk_g")

    keys.touch_key("acme", key.id, T0)
    assert keys.key_by_hash(digest("lore_sk_a")).last_used_at == T0
    later = T0 + timedelta(minutes=5)
    keys.touch_key("acme", key.id, later)
    assert keys.key_by_hash(digest("lore_sk_a")).last_used_at == later
    keys.touch_key("acme", key.id, T0)  # a request that finished late never moves it back
    assert keys.key_by_hash(digest("lore_sk_a")).last_used_at == later

    keys.touch_key("acme", other.id, later)  # another org's key: silently nothing
    keys.touch_key("acme", "01NOSUCHKEY0000000000000000", later)
    assert keys.key_by_hash(digest("lore_sk_g")) == other


def test_orgs_and_keys_outlive_the_process(
    store, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    org = store.keys.create_org("acme", "Acme")
    key = add(store.keys, "acme", "lore_sk_kept", project="web", root=True)
    key = store.keys.revoke_key("acme", key.id)
    store.close()
    if backend == "local":
        reopened = open_local_store(tmp_path / "lore.db")
    else:
        reopened = open_postgres_store(request.getfixturevalue("postgres_url"))
    try:
        assert reopened.keys.get_org("acme") == org
        assert reopened.keys.key_by_hash(digest("lore_sk_kept")) == key
        assert reopened.keys.list_keys("acme") == [key]
    finally:
        reopened.close()


def test_a_local_file_at_schema_2_gains_orgs_and_keys(tmp_path: Path, monkeypatch) -> None:
    from stores.sqlite import migrations as local_db

    path = tmp_path / "old.db"
    with monkeypatch.context() as old:
        old.setattr(local_db, "MIGRATIONS", local_db.MIGRATIONS[:2])
        old.setattr(local_db, "SCHEMA_VERSION", 2)
        open_local_store(path).close()
    store = open_local_store(path)
    try:
        versions = [
            r[0]
            for r in store._backend.conns.reader.execute("SELECT version FROM schema_migrations ORDER BY 1")
        ]
        assert versions == list(range(1, local_db.SCHEMA_VERSION + 1))
        store.keys.create_org("acme", "Acme")
        key = add(store.keys, "acme", "lore_sk_new")
        assert store.keys.key_by_hash(digest("lore_sk_new")) == key
    finally:
        store.close()


# -- Postgres only: row-level security and upgrades -----------------------------


@pytest.fixture
def pg_store(postgres_url: str):
    empty_postgres(postgres_url)
    store = open_postgres_store(postgres_url)
    yield store
    store.close()


@contextlib.contextmanager
def as_lore(url: str) -> Iterator[psycopg.Connection]:
    """A connection working as every Lore connection does: without superuser powers."""
    with psycopg.connect(url, autocommit=True) as conn:
        if privileged(conn):
            conn.execute(f"SET ROLE {RLS_ROLE}")
        yield conn


def privileged(conn: psycopg.Connection) -> bool:
    return bool(
        conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()[
            0
        ]
    )


def test_an_org_cannot_see_another_orgs_keys_under_row_level_security(postgres_url: str, pg_store) -> None:
    keys = pg_store.keys
    keys.create_org("acme", "Acme")
    keys.create_org("globex", "Globex")
    mine = add(keys, "acme", "lore_sk_a")
    theirs = add(keys, "globex", "lore_sk_g")
    with as_lore(postgres_url) as conn:
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT set_config('lore.org', 'acme', true)")
            # No org filter at all: the policies still confine the queries to acme.
            assert [r[0] for r in conn.execute("SELECT * FROM api_keys").fetchall()] == [mine.id]
            assert conn.execute("SELECT id FROM orgs").fetchall() == [("acme",)]
            assert conn.execute("UPDATE api_keys SET name = 'pwned'").rowcount == 1
            assert conn.execute("DELETE FROM api_keys WHERE org_id = 'globex'").rowcount == 0
            assert conn.execute("UPDATE orgs SET name = 'pwned' WHERE id = 'globex'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SELECT set_config('lore.org', 'acme', true)")
            conn.execute(
                "INSERT INTO api_keys (id, org_id, name, key_hash, key_prefix, is_root, created_at) "
                "VALUES ('x', 'globex', 'n', 'h', 'p', true, now())"
            )
        with conn.transaction(force_rollback=True):
            # The auth lookup knows only the digest: it reads that one row and changes nothing.
            conn.execute("SELECT set_config('lore.key_hash', %s, true)", (digest("lore_sk_g"),))
            assert [r[0] for r in conn.execute("SELECT * FROM api_keys").fetchall()] == [theirs.id]
            assert conn.execute("SELECT id FROM orgs").fetchall() == []
            assert conn.execute("UPDATE api_keys SET name = 'pwned'").rowcount == 0
            assert conn.execute("DELETE FROM api_keys").rowcount == 0
        # A transaction that says neither its org nor a digest sees no keys at all.
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM orgs").fetchone()[0] == 0
    assert keys.key_by_hash(digest("lore_sk_a")) == mine
    assert keys.key_by_hash(digest("lore_sk_g")) == theirs
    assert keys.list_keys("acme") == [mine] and keys.list_keys("globex") == [theirs]


def test_a_postgres_at_schema_2_gains_orgs_and_keys_for_the_rls_role(postgres_url: str, monkeypatch) -> None:
    from stores.postgres import migrations as postgres_db

    name = f"lore_upgrade_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        try:
            admin.execute(f'CREATE DATABASE "{name}"')
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("this login may not create a database of its own")
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    try:
        with monkeypatch.context() as old:
            old.setattr(postgres_db, "MIGRATIONS", postgres_db.MIGRATIONS[:2])
            old.setattr(postgres_db, "SCHEMA_VERSION", 2)
            open_postgres_store(url).close()
        store = open_postgres_store(url)  # migration 3, and the grants on its new tables
        try:
            with store._backend._engine.connect() as conn:
                versions = conn.execute(text("SELECT version FROM schema_migrations ORDER BY 1")).scalars()
                assert list(versions) == list(range(1, postgres_db.SCHEMA_VERSION + 1))
                user = conn.execute(text("SELECT current_user")).scalar()
                login_privileged = conn.execute(
                    text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = session_user")
                ).scalar()
            if login_privileged:
                assert user == RLS_ROLE
            store.keys.create_org("acme", "Acme")
            key = add(store.keys, "acme", "lore_sk_upgraded")
            assert store.keys.key_by_hash(digest("lore_sk_upgraded")) == key
            assert store.keys.list_keys("acme") == [key]
            assert store.keys.touch_key("acme", key.id, T0) is None
            assert store.keys.revoke_key("acme", key.id).last_used_at == T0
        finally:
            store.close()
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_recording_a_key_use_never_waits_behind_a_long_write(tmp_path: Path) -> None:
    """A key check records last use on the writer; while another call holds the writer (or
    another process the file's lock), the touch is skipped at once instead of queued."""
    import subprocess
    import sys
    import time

    from stores import open_local_store

    store = open_local_store(tmp_path / "lore.db")
    keys = store.keys
    keys.create_org("acme", "Acme")
    key = add(keys, "acme", "lore_sk_a")
    with store._backend.conns.write_lock:  # a heavy apply of this process is writing
        started = time.perf_counter()
        keys.touch_key("acme", key.id, T0)
        assert time.perf_counter() - started < 0.1
    assert keys.key_by_hash(digest("lore_sk_a")).last_used_at is None
    # Another process (the CLI) is writing: fcntl locks never conflict within one process.
    holder = (
        "import sqlite3, sys, time\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    outside = subprocess.Popen(
        [sys.executable, "-c", holder, str(tmp_path / "lore.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert outside.stdout is not None and outside.stdout.readline() == "locked\n"
        started = time.perf_counter()
        keys.touch_key("acme", key.id, T0)
        assert time.perf_counter() - started < 1.0
    finally:
        outside.communicate("done\n", timeout=30)
    assert keys.key_by_hash(digest("lore_sk_a")).last_used_at is None
    keys.touch_key("acme", key.id, T0)  # and the next request's touch is recorded
    assert keys.key_by_hash(digest("lore_sk_a")).last_used_at == T0
    store.close()
