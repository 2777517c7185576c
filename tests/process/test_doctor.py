"""`lore-memory doctor` checks each part and says what to fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stores import empty_postgres


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    return subprocess.run(
        [sys.executable, "-m", "lore_mcp", "doctor", *args],
        env={**base, "HF_HUB_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_healthy_local_setup_passes_every_check(tmp_path: Path) -> None:
    out = doctor(LORE_DB_PATH=str(tmp_path / "lore.db"))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for name in ("sqlite", "model", "database"):
        assert any(line.startswith("ok") and f" {name}:" in line for line in lines), name
    assert "sqlite-vec" in out.stdout and "384 dimensions" in out.stdout
    assert (tmp_path / "lore.db").exists()


def test_postgres_is_checked_for_pgvector(postgres_url: str) -> None:
    # The worker's database is shared: lessons another test left (a hash model's) failed the vectors check.
    empty_postgres(postgres_url)
    out = doctor("--store", "postgres", "--database-url", postgres_url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pgvector enabled" in out.stdout


def test_each_broken_part_fails_with_what_to_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = doctor(LORE_DB_PATH=str(blocker / "lore.db"), LORE_EMBEDDING_MODEL=str(tmp_path / "no-model"))
    assert out.returncode == 1
    assert "FAIL  model:" in out.stdout and "needs the sentence-transformers extra" in out.stdout
    assert "FAIL  database:" in out.stdout and "Check the path and its permissions" in out.stdout
    assert "ok    sqlite:" in out.stdout  # one broken part does not hide the others
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:9"])
def test_remote_mode_checks_the_team_server(url: str) -> None:
    out = doctor(LORE_STORE="remote", LORE_API_URL=url, LORE_API_KEY="lore_sk_" + "x" * 32)
    assert out.returncode == 1
    assert "FAIL  team server: cannot reach" in out.stdout and "LORE_API_URL" in out.stdout


def test_remote_mode_checks_the_key_against_a_running_team_server(store: object, embedder: object) -> None:
    from tests.support.team import team_server

    with team_server(store, embedder) as server:  # type: ignore[arg-type]
        key = server.keys.init_org("local").key
        good = doctor(LORE_STORE="remote", LORE_API_URL=server.base, LORE_API_KEY=key)
        assert good.returncode == 0, good.stdout
        assert "ok    team server:" in good.stdout and "accepts the key" in good.stdout
        bad = doctor(LORE_STORE="remote", LORE_API_URL=server.base, LORE_API_KEY="lore_sk_" + "y" * 32)
        assert bad.returncode == 1 and "refused LORE_API_KEY" in bad.stdout


def bound_doctor(**env: str) -> subprocess.CompletedProcess[str]:
    """``doctor`` as a user whom read-only files stop, even when the tests run as root."""
    from tests.support.privileges import bound_by_permissions

    base = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    return subprocess.run(
        bound_by_permissions([sys.executable, "-m", "lore_mcp", "doctor"]),
        env={**base, "HF_HUB_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_read_only_database_file_fails_the_database_check_with_the_fix(tmp_path: Path) -> None:
    from tests.support.privileges import make_read_only, make_writable

    db = tmp_path / "lore.db"
    assert doctor(LORE_DB_PATH=str(db)).returncode == 0
    make_read_only(db)
    try:
        out = bound_doctor(LORE_DB_PATH=str(db))
    finally:
        make_writable(db)
    assert out.returncode == 1, out.stdout
    assert (
        f"FAIL  database: The Lore database file {db} is read-only for this user, so every save would "
        f"answer UNAVAILABLE: run `chmod u+w {db}` or set LORE_DB_PATH to a writable file." in out.stdout
    )
    assert "All checks passed" not in out.stdout and "Traceback" not in out.stdout + out.stderr


def test_a_read_only_directory_fails_the_database_check_naming_the_wal_files(tmp_path: Path) -> None:
    from tests.support.privileges import make_read_only, make_writable

    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "lore.db"
    assert doctor(LORE_DB_PATH=str(db)).returncode == 0
    make_read_only(folder)
    try:
        out = bound_doctor(LORE_DB_PATH=str(db))
    finally:
        make_writable(folder)
    assert out.returncode == 1, out.stdout
    assert (
        f"FAIL  database: The directory {folder}, where SQLite keeps the Lore database's lore.db-wal"
        in out.stdout
    )
    assert f"run `chmod u+w {folder}` or set LORE_DB_PATH to a file in a writable directory." in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_remote_mode_at_a_wrong_path_says_there_is_no_lore_team_server_there(
    tmp_path: Path, embedder: object
) -> None:
    from stores import open_local_store
    from tests.support.team import team_server

    store = open_local_store(tmp_path / "team.db")
    try:
        with team_server(store, embedder) as server:  # type: ignore[arg-type]
            key = server.keys.init_org("local").key
            out = doctor(LORE_STORE="remote", LORE_API_URL=f"{server.base}/lore", LORE_API_KEY=key)
    finally:
        store.close()
    assert out.returncode == 1
    assert (
        f"FAIL  team server: there is no Lore team server at {server.base}/lore ({server.base}/lore/healthz "
        f"answered 404 Not Found); set LORE_API_URL to the team server's base URL or its /mcp endpoint, "
        f"such as {server.base}/mcp." in out.stdout
    )


def test_the_database_check_makes_a_real_write_and_fails_while_the_writer_is_held(tmp_path: Path) -> None:
    """Issue 21: a stuck writer showed nowhere; doctor now begins a write and rolls it back."""
    db = tmp_path / "lore.db"
    out = doctor(LORE_DB_PATH=str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"ok +database: .*a write began and rolled back in \d+ ms", out.stdout), out.stdout
    holder = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    held = subprocess.Popen(
        [sys.executable, "-c", holder, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert held.stdout is not None and held.stdout.readline() == "locked\n"
        stuck = doctor(LORE_DB_PATH=str(db))
    finally:
        held.communicate("done\n", timeout=30)
    assert stuck.returncode == 1, stuck.stdout
    # Opening (which migrates) or the probe waits for the lock, then fails naming it.
    assert re.search(
        r"FAIL +database: .*(stayed locked by another process|write lock has been held)", stuck.stdout
    )
