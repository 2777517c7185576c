"""A Postgres primary and a real streaming replica of it on this machine, both on pgserver.

The primary is pgserver's (PostgreSQL 16: ``wal_level = replica`` and ten WAL senders by
default, and its ``pg_hba.conf`` trusts local replication connections). ``pg_basebackup -R``
copies it into a second folder with ``standby.signal`` and ``primary_conninfo``, and pgserver
starts that folder as a hot standby on a socket of its own. As root, pgserver runs Postgres as
its own user, so the copy is made as that user too. Where pgserver's ``pg_basebackup`` is
missing the tests skip; under ``CI=true`` they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url


def _pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' runtime-dir warning, as in tests/conftest.py
        import pgserver
    return pgserver


def _basebackup_binary() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    binary = Path(POSTGRES_BIN_PATH) / "pg_basebackup"
    if not binary.exists():
        reason = f"{binary} is missing: the replica test needs pgserver's pg_basebackup"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the read replica test must run in CI: {reason}")
        pytest.skip(reason)
    return binary


def _copy(server: Any, into: Path) -> None:
    """``pg_basebackup -R`` of ``server`` into the empty folder ``into``, as pgserver's user."""
    into.mkdir(mode=0o700)
    user = server.system_user
    if user is not None:
        shutil.chown(into, user, user)
    socket = make_url(server.get_uri()).query["host"]
    command = [
        str(_basebackup_binary()),
        "-D",
        str(into),
        "-R",
        "-X",
        "stream",
        "-h",
        str(socket),
        "-U",
        "postgres",
    ]
    subprocess.run(command, check=True, user=user, capture_output=True, timeout=60)
    for left in (".handle_pids.json", ".s.PGSQL.5432.lock"):  # the primary's pgserver and socket locks
        (into / left).unlink(missing_ok=True)


@contextlib.contextmanager
def primary_and_standby(folder: Path) -> Iterator[tuple[Any, str, str]]:
    """Yields the primary's pgserver handle, its URL and the standby's URL."""
    pgserver = _pgserver()
    primary = pgserver.get_server(folder / "primary", cleanup_mode="stop")
    try:
        _copy(primary, folder / "standby")
        standby = pgserver.get_server(folder / "standby", cleanup_mode="stop")
        try:
            yield primary, primary.get_uri(), standby.get_uri()
        finally:
            standby.cleanup()
    finally:
        primary.cleanup()


def caught_up(primary_url: str, standby_url: str, timeout: float = 15) -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    with psycopg.connect(primary_url, autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
    deadline = time.monotonic() + timeout
    with psycopg.connect(standby_url, autocommit=True) as conn:
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:  # type: ignore[index]
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby did not replay up to {lsn} in {timeout} s")
            time.sleep(0.05)


def stop(server: Any) -> None:
    """Stop ``server`` now (``pg_ctl stop -m fast``), as the user that runs it."""
    from pgserver._commands import POSTGRES_BIN_PATH

    command = [str(Path(POSTGRES_BIN_PATH) / "pg_ctl"), "-D", str(server.pgdata), "-m", "fast", "-w", "stop"]
    subprocess.run(command, check=True, user=server.system_user, capture_output=True, timeout=60)
