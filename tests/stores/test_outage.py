"""A database outage says UNAVAILABLE, never "bad key", and never makes a request wait for ever.

These tests stop and freeze a Postgres of their own (``private_pg``), never the
session's shared one: "down" is ``pg_ctl stop``, "hung" is SIGSTOP sent to the
postmaster and every backend (a frozen server whose kernel still accepts and
acknowledges, which no statement timeout or TCP keepalive can notice).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import text

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import UnavailableError, open_postgres_store
from stores.postgres import db as pg
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.processes import lore, remote_params, wait_healthy
from tests.support.stores import empty_postgres
from tests.support.team import free_port, http_client, raw_post, team_server

# The bound: a hung or stopped database is UNAVAILABLE within this many seconds.
OUTAGE_BOUND_S = 10.0


@dataclass
class PrivatePostgres:
    """A pgserver these tests may stop, freeze and restart."""

    server: Any
    url: str

    @property
    def pgdata(self) -> Path:
        return Path(self.server.pgdata)

    def pg_ctl(self, *args: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def processes(self) -> list[psutil.Process]:
        """The postmaster (first line of postmaster.pid) and every process it started."""
        pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        postmaster = psutil.Process(pid)
        return [postmaster, *postmaster.children(recursive=True)]

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Postgres hung: every one of its processes stopped, its sockets still open."""
        stopped = self.processes()
        for proc in stopped:
            proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            for proc in stopped:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.send_signal(signal.SIGCONT)

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """Postgres stopped cleanly, then started again on the same socket."""
        self.pg_ctl("-w", "-m", "fast", "stop")
        try:
            yield
        finally:
            socket_dir = psycopg.conninfo.conninfo_to_dict(self.url)["host"]
            self.pg_ctl(
                "-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.pgdata / "log"), "start"
            )


@pytest.fixture(scope="module")
def private_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivatePostgres]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pgserver's import warns without XDG_RUNTIME_DIR
        import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("outage-pg"), cleanup_mode="stop")
    private = PrivatePostgres(server, server.get_uri())
    try:
        yield private
    finally:
        # After a restart pgserver no longer knows the running postmaster, so stop it here.
        if (private.pgdata / "postmaster.pid").exists():
            private.pg_ctl("-w", "-m", "fast", "stop")
        server.cleanup()


@pytest.fixture
def pg_store(private_pg: PrivatePostgres) -> Iterator[Any]:
    """A Lore store on the private Postgres, emptied first."""
    empty_postgres(private_pg.url)
    store = open_postgres_store(private_pg.url)
    yield store
    store.close()


def unavailable_body(response: httpx2.Response) -> str:
    """The message of a 503 JSON-RPC error body (asserting its shape)."""
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"].isdigit()
    error = response.json()["error"]
    assert error["message"].startswith("UNAVAILABLE: ")
    return error["message"]


# -- Postgres stopped -----------------------------------------------------------------------


def test_with_postgres_down_a_valid_key_gets_503_unavailable_not_401(
    private_pg: PrivatePostgres, pg_store: Any, embedder: Embedder
) -> None:
    with team_server(pg_store, embedder) as server:
        key = server.keys.init_org("acme").key
        assert raw_post(server.url, f"Bearer {key}").status_code == 200
        with private_pg.down():
            message = unavailable_body(raw_post(server.url, f"Bearer {key}"))
            assert "database" in message and "unreachable" in message
            # An unknown well-formed key is answered the same way: the outage reveals nothing.
            assert raw_post(server.url, "Bearer lore_sk_" + "Q" * 32).status_code == 503
            # A key that cannot exist never reaches the database: still the usual 401.
            assert raw_post(server.url, "Bearer lore_sk_short").status_code == 401
            health = httpx2.get(f"{server.base}/healthz", timeout=10)
            assert health.status_code == 503 and health.json()["status"] == "unavailable"
        # Back by itself, from the very next request: no restart of Lore.
        assert raw_post(server.url, f"Bearer {key}").status_code == 200
        assert httpx2.get(f"{server.base}/healthz", timeout=10).status_code == 200


async def test_remote_mode_says_the_team_servers_database_is_unreachable(
    private_pg: PrivatePostgres, pg_store: Any, embedder: Embedder
) -> None:
    with team_server(pg_store, embedder) as server:
        key = server.keys.init_org("local").key
        failures = []
        async with connected(remote_params(server.url, key)) as client:
            assert (await call(client, "list_lessons"))["lessons"] == []
            with private_pg.down():
                # Once inside an open session, once while connecting afresh.
                for _ in range(2):
                    with pytest.raises(ToolFailed) as err:
                        await call(client, "list_lessons")
                    failures.append(err.value)
            assert (await call(client, "list_lessons"))["lessons"] == []
    for failure in failures:
        assert failure.code == "UNAVAILABLE"
        assert "database is unreachable" in failure.message
        assert "revoked" not in failure.message and "ask an admin" not in failure.message


# -- Postgres hung --------------------------------------------------------------------------


async def test_with_postgres_hung_a_request_is_unavailable_within_seconds_then_recovers(
    private_pg: PrivatePostgres, pg_store: Any, embedder: Embedder
) -> None:
    with team_server(pg_store, embedder) as server:
        key = server.keys.init_org("acme").key
        async with http_client(server.url, key) as client:
            assert (await call(client, "list_lessons"))["lessons"] == []
            with private_pg.frozen():
                started = time.monotonic()
                with pytest.raises(MCPError) as err:
                    await call(client, "list_lessons")
                elapsed = time.monotonic() - started
                health = await anyio.to_thread.run_sync(
                    lambda: httpx2.get(f"{server.base}/healthz", timeout=30)
                )
            assert str(err.value).startswith("UNAVAILABLE: ")
            assert "database" in str(err.value)
            assert elapsed < OUTAGE_BOUND_S
            assert health.status_code == 503
            # The same session goes on working at once, with no restart of Lore.
            saved = await call(client, "save_lesson", problem="after the freeze", resolution="it works")
            assert (await call(client, "get_lesson", id=saved["id"]))["problem"] == "after the freeze"


async def test_a_tool_call_waiting_on_a_hung_postgres_is_unavailable_within_seconds(
    private_pg: PrivatePostgres, pg_store: Any, embedder: Embedder
) -> None:
    """No key lookup in front here (stdio-style): the store's own calls must give up."""
    server = build_server(LessonService(pg_store, embedder, default_project="default"))
    async with connected(server) as client:
        await call(client, "list_lessons")
        with private_pg.frozen():
            started = time.monotonic()
            with pytest.raises(ToolFailed) as err:
                await call(client, "list_lessons")
            elapsed = time.monotonic() - started
        assert err.value.code == "UNAVAILABLE"
        assert "Postgres" in err.value.message
        assert elapsed < OUTAGE_BOUND_S
        # Once Postgres answers again, so does Lore, from the very next call.
        assert (await call(client, "list_lessons"))["lessons"] == []


def test_maintenance_goes_on_while_new_connections_go_unanswered(private_pg: PrivatePostgres) -> None:
    """A million rows' index build was cut in its sixth minute: the server, busy with it, took over
    2 s to answer the hang watch's fresh connection. Here the postmaster alone is stopped, so running
    backends go on and new connections get no answer: an ordinary statement waiting that long is
    cut, one inside ``unbounded`` (an import's index build, a migration) waits on to its end."""
    engine = pg.engine_for(private_pg.url, 2)
    holder = psycopg.connect(private_pg.url, autocommit=True)
    postmaster = private_pg.processes()[0]
    outcome: list[BaseException | None] = []

    def maintenance() -> None:
        try:
            with pg.transaction(engine, None) as conn, pg.unbounded(conn):
                conn.execute(text("SELECT pg_advisory_xact_lock(37)"))
            outcome.append(None)
        except BaseException as exc:  # reported to the test below
            outcome.append(exc)

    try:
        with engine.connect() as one, engine.connect() as two:  # both pooled before the freeze
            one.execute(text("SELECT 1"))
            two.execute(text("SELECT 1"))
        holder.execute("SELECT pg_advisory_lock(37)")
        postmaster.send_signal(signal.SIGSTOP)
        try:
            worker = threading.Thread(target=maintenance)
            worker.start()
            wait_for_lock_waiter(holder)
            with pytest.raises(UnavailableError), pg.transaction(engine, None) as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(37)"))  # cut once the probe goes unanswered
            assert worker.is_alive() and not outcome
            holder.execute("SELECT pg_advisory_unlock(37)")
            worker.join(timeout=60)
        finally:
            postmaster.send_signal(signal.SIGCONT)
        assert outcome == [None], outcome
    finally:
        holder.close()
        engine.dispose()


# -- the connection settings ----------------------------------------------------------------


def test_postgres_connections_carry_timeouts_and_keepalives(postgres_url: str) -> None:
    engine = pg.engine_for(postgres_url, 1)
    try:
        with pg.transaction(engine, None) as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "30s"
            assert conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1min"
            params = conn.connection.dbapi_connection.info.get_parameters()
        assert params["connect_timeout"] == "5"
        assert params["keepalives_idle"] == "5"
        assert params["tcp_user_timeout"] == "10000"
    finally:
        engine.dispose()


def test_prepared_statements_are_planned_for_their_parameters(postgres_url: str) -> None:
    """psycopg prepares a statement its connection ran five times, and Postgres then plans it once
    for any parameters: blind to ``LIMIT :k`` and the project, a recall's HNSW search became an
    exact scan of the project. Every run must get a plan of its own."""
    engine = pg.engine_for(postgres_url, 1)
    try:
        with pg.transaction(engine, None) as conn:
            assert conn.execute(text("SHOW plan_cache_mode")).scalar() == "force_custom_plan"
            for n in range(12):
                assert conn.execute(text("SELECT CAST(:n AS int) + 1"), {"n": n}).scalar() == n + 1
            plans = conn.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%+ 1'"
                )
            ).one()
        assert plans[0] == 0 and plans[1] >= 7, plans
    finally:
        engine.dispose()


def test_the_database_url_overrides_each_timeout(postgres_url: str) -> None:
    url = postgres_url + "&connect_timeout=7&options=-c%20statement_timeout%3D250ms"
    engine = pg.engine_for(url, 1)
    try:
        with pg.transaction(engine, None) as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "250ms"
            assert conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1min"
            assert conn.connection.dbapi_connection.info.get_parameters()["connect_timeout"] == "7"
        # A statement past the limit is UNAVAILABLE with a sentence, not an internal error.
        with pytest.raises(UnavailableError, match="statement_timeout"), pg.transaction(engine, None) as conn:
            conn.execute(text("SELECT pg_sleep(2)"))
    finally:
        engine.dispose()


def test_a_pool_with_every_connection_busy_is_unavailable_not_a_hang(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg, "POOL_TIMEOUT_S", 0.5)
    engine = pg.engine_for(postgres_url, 1)  # one connection plus one overflow
    try:
        with pg.transaction(engine, None), pg.transaction(engine, None):
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="busy"), pg.transaction(engine, None):
                pass
            assert time.monotonic() - started < 5
    finally:
        engine.dispose()


# -- SIGTERM --------------------------------------------------------------------------------


async def test_sigterm_exits_within_the_drain_time_even_with_a_request_stuck_on_a_hung_database(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    empty_postgres(private_pg.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(
        HF_HUB_OFFLINE="1", LORE_STORE="postgres", LORE_DATABASE_URL=private_pg.url, LORE_DRAIN_TIMEOUT_S="2"
    )
    key = json.loads(lore(env, "init", "--json").stdout)["key"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lore_mcp", "mcp", "--transport", "http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    # Holding the project's write lock makes the server's save wait inside Postgres, where
    # pg_stat_activity shows it: the request is then surely stuck in a worker thread.
    blocker = psycopg.connect(private_pg.url, autocommit=True)
    try:
        wait_healthy(base, proc)
        blocker.execute("SELECT pg_advisory_lock(hashtext('local/default'))")
        outcome: list[BaseException | dict[str, Any]] = []
        exited: list[tuple[int, float]] = []
        try:
            async with http_client(f"{base}/mcp", key) as client:
                await call(client, "recall_lessons", query="warm up the model")

                async def save() -> None:
                    try:
                        outcome.append(await call(client, "save_lesson", problem="stuck", resolution="never"))
                    except Exception as exc:
                        outcome.append(exc)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(save)
                    await anyio.to_thread.run_sync(wait_for_lock_waiter, blocker)
                    with private_pg.frozen():
                        proc.send_signal(signal.SIGTERM)
                        sent = time.monotonic()
                        code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30))
                        exited.append((code, time.monotonic() - sent))
        except* httpx2.TransportError:
            pass  # the server went away under the client's pending request, as it had to
        code, exited_after = exited[0]
        assert exited_after < 2 + 5, exited_after
        assert code == 1  # exited at the deadline, not after a clean drain
        assert "still running after 2 s" in proc.stderr.read().decode()  # type: ignore[union-attr]
        assert outcome and not isinstance(outcome[0], dict)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]
        blocker.close()
    # The stuck save never committed: nothing half done.
    with psycopg.connect(private_pg.url) as conn:
        assert conn.execute("SELECT count(*) FROM lessons").fetchone()[0] == 0


def wait_for_lock_waiter(conn: psycopg.Connection[Any], timeout: float = 60) -> None:
    """Until another session waits on an advisory lock (the server's save)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
        ).fetchone()
        if waiting is not None and waiting[0] > 0:
            return
        time.sleep(0.05)
    raise AssertionError("the save never reached Postgres")
