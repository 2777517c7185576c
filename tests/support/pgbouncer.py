"""A real PgBouncer in transaction mode on a loopback port, in front of the test database.

Debian's ``pgbouncer`` package (1.18; ``.ci/run`` installs it) provides ``/usr/sbin/pgbouncer``.
Where it is missing the tests skip, saying so; under ``CI=true`` they fail instead. PgBouncer
refuses to run as root, so as root it runs as pgserver's user (or ``postgres``, ``nobody``), from a
folder of its own in the system's temporary directory that such a user can read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.support.team import free_port


def pgbouncer_binary() -> str:
    """The ``pgbouncer`` executable, or a skip (a failure under CI=true)."""
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        reason = "pgbouncer is not installed: `apt-get install pgbouncer` (.ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the PgBouncer tests must run in CI: {reason}")
        pytest.skip(reason)
    return found


def _target(url: str) -> str:
    """PgBouncer's ``[databases]`` entry for the database at ``url`` (a socket folder or a host)."""
    u = make_url(url)
    host = u.host or u.query.get("host") or "/tmp"
    parts = {"host": host, "port": u.port or 5432, "dbname": u.database, "user": u.username or "postgres"}
    if u.password:
        parts["password"] = u.password
    return " ".join(f"{k}={v}" for k, v in parts.items())


def _as_other_user() -> str | None:
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("pgserver", "postgres", "nobody"):  # pgserver's own user reaches its socket
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name).pw_name
    return None


@contextlib.contextmanager
def pgbouncer(url: str, *, pool_size: int = 3) -> Iterator[str]:
    """Run PgBouncer (transaction mode, ``pool_size`` server connections) in front of ``url``;
    yields the URL that reaches the same database through it."""
    binary = pgbouncer_binary()
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="lore-pgbouncer-"))
    folder.chmod(0o777)
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        f"[databases]\nlore = {_target(url)}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n"
        f"unix_socket_dir =\nauth_type = any\npool_mode = transaction\ndefault_pool_size = {pool_size}\n"
        f"max_client_conn = 200\nlogfile = {folder / 'pgbouncer.log'}\nserver_check_delay = 0\n"
    )
    ini.chmod(0o644)
    proc = subprocess.Popen([binary, str(ini)], user=_as_other_user(), stderr=subprocess.DEVNULL)
    try:
        pooled = f"postgresql://lore@127.0.0.1:{port}/lore"
        _wait_answering(pooled, proc, folder)
        yield pooled
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_answering(url: str, proc: subprocess.Popen[bytes], folder: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (folder / "pgbouncer.log").read_text() if (folder / "pgbouncer.log").exists() else ""
                raise RuntimeError(f"pgbouncer did not answer: {log[-2000:]}") from None
            time.sleep(0.1)
