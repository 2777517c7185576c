"""A server killed in the middle of a big apply leaves the project either untouched or fully changed.

A real ``lore-memory mcp`` process gets one plan that creates a table and inserts many rows,
and is sent SIGKILL on an event, never after a guessed time:

- while it plans, once it reports progress, with the store's writer held by the test so that
  it cannot have begun to write;
- in the middle of its write transaction. On Postgres the test holds an uncommitted commit row
  of the same number, so the server writes every row and then waits on it. On SQLite the test
  empties the write-ahead log first, stops the server at its first write there and reads the
  log: one that does not end with a whole commit frame is a transaction under way.

A revert of a full apply is killed in the middle of its write the same way. Another store
opened on the same database must then find the table with every row and exactly one apply
commit, or the schema as it was with no rows and no commit (always so when the kill came
mid-write), and go on accepting plans.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import Store, open_local_store, open_postgres_store
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.plans import (
    ROWS,
    apply_ops,
    big_operations,
    column,
    create_table,
    insert,
    make_plan,
    table_of,
)
from tests.support.processes import RawServer, server_env

REPLY_TIMEOUT = 120
# SQLite's mid-write kill comes after the commit frame if the test is starved that long.
SQLITE_TRIES = 3


class Driven(RawServer):
    """A raw server process with tool calls that wait for their own reply or progress."""

    next_id = 100

    def send_call(self, tool: str, arguments: dict[str, Any], *, progress: bool = False) -> int:
        self.next_id += 1
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if progress:
            params["_meta"] = {"progressToken": self.next_id}
        self.request(self.next_id, "tools/call", params)
        return self.next_id

    def next_message(self, deadline: float, msg_id: int) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"nothing more about request {msg_id}")
        if time.monotonic() > deadline:
            pytest.fail(f"nothing about request {msg_id} in {REPLY_TIMEOUT} s")
        return json.loads(line)

    def wait_for(self, msg_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + REPLY_TIMEOUT
        while (message := self.next_message(deadline, msg_id)).get("id") != msg_id:
            pass
        return message

    def wait_for_progress(self, msg_id: int) -> None:
        """Return at the call's first progress notification: it is running, not yet answered."""
        deadline = time.monotonic() + REPLY_TIMEOUT
        while True:
            message = self.next_message(deadline, msg_id)
            assert message.get("id") != msg_id, f"request {msg_id} answered before any progress: {message}"
            if message.get("params", {}).get("progressToken") == msg_id:
                return

    def tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = self.wait_for(self.send_call(tool, arguments))
        result = reply["result"]
        assert not result.get("isError"), result["content"][0]["text"][:500]
        return result["structuredContent"]

    def replied(self, msg_id: int) -> bool:
        """Whether a reply to ``msg_id`` is among the lines already read."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return False
            with contextlib.suppress(ValueError):
                if json.loads(line).get("id") == msg_id:
                    return True

    def freeze(self) -> None:
        """SIGSTOP: the process stays as it is until it is killed."""
        self.proc.send_signal(signal.SIGSTOP)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        with contextlib.suppress(BrokenPipeError, OSError):
            self.close()


def start(env: dict[str, str]) -> Driven:
    server = Driven(env)
    assert "result" in server.initialize()
    return server


def wait_until(what: str, happened: Callable[[], bool]) -> None:
    """Poll for an event the test cannot be told of, up to a deadline far past any busy machine's."""
    deadline = time.monotonic() + REPLY_TIMEOUT
    while not happened():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen in {REPLY_TIMEOUT} s")
        time.sleep(0.001)


def frames_of(wal: bytes) -> tuple[list[bool], bool]:
    """Per whole frame of a write-ahead log, whether it commits a transaction (its header's second
    word is set); and whether more was written (a header alone, a frame half written)."""
    if len(wal) < 32:
        return [], bool(wal)
    frame = 24 + int.from_bytes(wal[8:12], "big")
    whole, part = divmod(len(wal) - 32, frame)
    starts = [32 + n * frame for n in range(whole)]
    return [int.from_bytes(wal[at + 4 : at + 8], "big") != 0 for at in starts], part > 0


def ends_committed(wal: bytes) -> bool:
    """Whether the log ends with a whole commit frame.

    Only for a log the test emptied first, which then holds the one writer's frames: a log that
    ends otherwise is a write under way.
    """
    commits, more = frames_of(wal)
    return bool(commits) and commits[-1] and not more


Caught = Callable[[Driven], bool]


class SqliteGates:
    """The writer held, and a write caught part-way, on a local store."""

    tries = SQLITE_TRIES

    def __init__(self, db: Path) -> None:
        self.db = db
        self.wal = Path(f"{db}-wal")

    def wal_size(self) -> int:
        """The log's size; it is gone while no connection has the database open."""
        with contextlib.suppress(FileNotFoundError):
            return self.wal.stat().st_size
        return 0

    @contextlib.contextmanager
    def writer_held(self, project: str, seq: int) -> Iterator[None]:
        from stores.sqlite.db import connect

        conn = connect(self.db)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()

    def empty_log(self) -> None:
        """Checkpoint and truncate the log: what it holds next is the next writer's alone."""
        from stores.sqlite.db import connect

        conn = connect(self.db)
        try:
            busy, frames, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        assert (busy, frames, self.wal_size()) == (0, 0, 0)

    @contextlib.contextmanager
    def mid_write(self, project: str, seq: int) -> Iterator[Caught]:
        self.empty_log()

        def caught(server: Driven) -> bool:
            wait_until("the server's first write", lambda: self.wal_size() > 0)
            server.freeze()
            return not ends_committed(self.wal.read_bytes())

        yield caught


class PostgresGates:
    """The writer held, and a write caught part-way, on Postgres: an uncommitted commit row of the
    number the server's commit will take keeps its insert waiting, after every other write."""

    tries = 1

    def __init__(self, url: str, project_of_org: str) -> None:
        import psycopg

        self.url = url
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT org_id FROM commits WHERE project = %s", (project_of_org,)).fetchone()
        assert row is not None
        self.org = row[0]

    @contextlib.contextmanager
    def writer_held(self, project: str, seq: int) -> Iterator[int]:
        import psycopg

        with psycopg.connect(self.url) as hold:
            hold.execute(
                "INSERT INTO commits (id, org_id, project, seq, kind, message, actor, created_at, "
                "schema_hash_before, schema_hash_after, effects) "
                "VALUES (%s, %s, %s, %s, 'apply', 'held', 'test', now(), '', '', '{}')",
                (uuid.uuid4().hex, self.org, project, seq),
            )
            yield hold.info.backend_pid
            hold.rollback()

    @contextlib.contextmanager
    def mid_write(self, project: str, seq: int) -> Iterator[Caught]:
        import psycopg

        with self.writer_held(project, seq) as holder, psycopg.connect(self.url, autocommit=True) as look:

            def waiting_after_its_rows() -> bool:
                return bool(
                    look.execute(
                        "SELECT 1 FROM pg_locks l WHERE l.relation = 'mem_rows'::regclass "
                        "AND l.mode = 'RowExclusiveLock' AND l.granted AND %s = ANY(pg_blocking_pids(l.pid))",
                        (holder,),
                    ).fetchone()
                )

            def caught(server: Driven) -> bool:
                wait_until("the server's wait on the held commit", waiting_after_its_rows)
                return True

            yield caught


Gates = SqliteGates | PostgresGates


def killed_apply(server: Driven, project: str, gates: Gates, *, planning: bool) -> dict[str, Any]:
    """Send ``project`` the big plan and kill the server while it plans (the writer held) or mid-write."""
    base = server.tool("schema", {"project": project})["schema_hash"]
    plan = {"plan": make_plan(base, *big_operations()), "project": project}
    mid_write = False
    if planning:
        with gates.writer_held(project, 1):
            msg_id = server.send_call("apply", plan, progress=True)
            server.wait_for_progress(msg_id)
            server.kill()
    else:
        with gates.mid_write(project, 1) as caught:
            msg_id = server.send_call("apply", plan)
            mid_write = caught(server)
            server.kill()
    return {"project": project, "base": base, "replied": server.replied(msg_id), "mid_write": mid_write}


def crash_runs(
    env: dict[str, str], prefix: str, gates_for: Callable[[str], Gates]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One full apply, one apply killed while planning, applies killed mid-write (until one is
    caught before its commit), then a revert of the full apply killed mid-write.

    Returns the full apply (with its project) and, per killed apply, its project, the schema hash
    before it, whether a reply came before the kill and whether it was caught mid-write.
    """
    server = start(env)
    attempts: list[dict[str, Any]] = []
    try:
        full = f"{prefix}-full"
        base = server.tool("schema", {"project": full})["schema_hash"]
        applied = server.tool(
            "apply", {"plan": make_plan(base, *big_operations(), message="big"), "project": full}
        )
        assert applied["effects"]["rows"]["inserted"] == ROWS
        applied.update(project=full, base=base)
        gates = gates_for(full)
        attempts.append(killed_apply(server, f"{prefix}-0", gates, planning=True))
        for n in range(1, gates.tries + 1):
            server = start(env)
            attempts.append(killed_apply(server, f"{prefix}-{n}", gates, planning=False))
            if attempts[-1]["mid_write"]:
                break
        server = start(env)
        with gates.mid_write(full, 2) as caught:
            msg_id = server.send_call("revert_commit", {"commit_id": applied["commit_id"], "project": full})
            applied["revert_mid_write"] = caught(server)
            server.kill()
        applied["revert_replied"] = server.replied(msg_id)
    finally:
        if server.proc.poll() is None:
            server.kill()
    return applied, attempts


async def check_consistent(
    store: Store, embedder: Embedder, applied: dict[str, Any], attempts: list[dict[str, Any]]
) -> list[str]:
    """Assert each attempt left all or nothing; returns what each one left, the revert last."""
    applied_hash = applied["schema_hash"]
    outcomes = []
    server = build_server(LessonService(store, embedder, default_project="default"))
    async with connected(server) as client:
        # The schema hash is a property of the schema, not of the process that computed it.
        fresh = await apply_ops(client, big_operations()[0], project=f"{attempts[0]['project']}-fresh")
        assert fresh["schema_hash"] == applied_hash
        for attempt in attempts:
            project = attempt["project"]
            schema = await call(client, "schema", project=project)
            commits = (await call(client, "history", project=project))["commits"]
            if schema["tables"]:
                outcomes.append("applied")
                assert not attempt["mid_write"], f"killed before its commit, yet it landed: {attempt}"
                assert [t["name"] for t in schema["tables"]] == ["crash"], attempt
                assert table_of(schema, "crash")["row_count"] == ROWS, attempt
                assert schema["schema_hash"] == applied_hash, attempt
                assert [c["kind"] for c in commits] == ["apply"], attempt
                assert commits[0]["schema_hash_before"] == attempt["base"]
                newest = await call(
                    client,
                    "query_rows",
                    table="crash",
                    project=project,
                    limit=2,
                    order_by=[{"column": "id", "direction": "desc"}],
                )
                assert [r["id"] for r in newest["rows"]] == [ROWS, ROWS - 1]
                assert newest["rows"][0]["n"] == ROWS - 1
            else:
                outcomes.append("untouched")
                assert not attempt["replied"], (
                    f"the apply answered before the kill but left nothing: {attempt}"
                )
                assert schema["schema_hash"] == attempt["base"], attempt
                assert commits == [], attempt
                with pytest.raises(ToolFailed) as err:
                    await call(client, "query_rows", table="crash", project=project)
                assert err.value.code == "NOT_FOUND"
            # The project still takes plans, and its history continues without a gap.
            after = await apply_ops(
                client,
                create_table("after_crash", column("x", "text")),
                insert("after_crash", {"x": "ok"}),
                project=project,
            )
            assert after["seq"] == len(commits) + 1

        # The killed revert of the full apply: the table whole and one commit, or gone and two.
        project = applied["project"]
        schema = await call(client, "schema", project=project)
        kinds = [c["kind"] for c in (await call(client, "history", project=project))["commits"]]
        if schema["tables"]:
            outcomes.append("revert rolled back")
            assert not applied["revert_replied"]
            assert table_of(schema, "crash")["row_count"] == ROWS
            assert schema["schema_hash"] == applied_hash and kinds == ["apply"]
        else:
            outcomes.append("reverted")
            assert not applied["revert_mid_write"], "the revert was killed before its commit, yet it landed"
            assert schema["schema_hash"] == applied["base"] and kinds == ["revert", "apply"]
        again = await apply_ops(client, create_table("after_crash", column("x", "text")), project=project)
        assert again["seq"] == len(kinds) + 1
    return outcomes


def sqlite_integrity(path: Path) -> str:
    from stores.sqlite.db import connect

    conn = connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def wait_until_postgres_is_quiet(url: str) -> None:
    """Wait until no other session holds a transaction open (the killed server's is rolled back)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:

        def quiet() -> bool:
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
            ).fetchone()
            return busy is not None and busy[0] == 0

        wait_until("the end of every other Postgres session's transaction after the kill", quiet)


def report(outcomes: list[str], attempts: list[dict[str, Any]]) -> None:
    kinds = ["planning", *("mid-write" if a["mid_write"] else "late" for a in attempts[1:]), "revert"]
    print("crash outcomes:", list(zip(outcomes, kinds, strict=True)))


async def test_a_local_server_killed_mid_apply_leaves_all_or_nothing(
    tmp_path: Path, embedder: Embedder
) -> None:
    db = tmp_path / "lore.db"
    applied, attempts = crash_runs(server_env(db), "crash", lambda project: SqliteGates(db))
    assert sqlite_integrity(db) == "ok"
    store = open_local_store(db)
    try:
        outcomes = await check_consistent(store, embedder, applied, attempts)
    finally:
        store.close()
    report(outcomes, attempts)
    assert outcomes[0] == "untouched"
    assert attempts[-1]["mid_write"], f"no kill came before the commit in {SQLITE_TRIES} tries"


async def test_a_postgres_server_killed_mid_apply_leaves_all_or_nothing(
    tmp_path: Path, postgres_url: str, embedder: Embedder
) -> None:
    prefix = f"crash-{uuid.uuid4().hex[:10]}"  # other tests' projects may still be in the database
    env = server_env(tmp_path / "unused.db", LORE_STORE="postgres", LORE_DATABASE_URL=postgres_url)
    applied, attempts = crash_runs(env, prefix, lambda project: PostgresGates(postgres_url, project))
    wait_until_postgres_is_quiet(postgres_url)
    store = open_postgres_store(postgres_url)
    try:
        outcomes = await check_consistent(store, embedder, applied, attempts)
    finally:
        store.close()
    report(outcomes, attempts)
    assert outcomes == ["untouched", "untouched", "revert rolled back"]


async def test_a_local_apply_writes_one_transaction(tmp_path: Path) -> None:
    """What a kill at the first frame cannot see (a commit after it), the log shows: one commit, last."""
    db = tmp_path / "lore.db"
    gates, server = SqliteGates(db), start(server_env(db))
    try:
        base = server.tool("schema", {"project": "one"})["schema_hash"]
        gates.empty_log()
        applied = server.tool("apply", {"plan": make_plan(base, *big_operations()), "project": "one"})
        commits, more = frames_of(gates.wal.read_bytes())
    finally:
        server.kill()
    assert applied["effects"]["rows"]["inserted"] == ROWS
    assert len(commits) > 100 and not more, "the apply's rows were not in the log"
    assert [n for n, commit in enumerate(commits) if commit] == [len(commits) - 1]
