"""A server killed in the middle of a big apply leaves the project either untouched or fully changed.

A real ``lore-memory mcp`` process gets one plan that creates a table and inserts many rows;
it is sent SIGKILL part-way (timed from a full run of the same plan). Another store opened
on the same database must then find either the table with every row and exactly one apply
commit, or the schema as it was with no rows and no commit, and go on accepting plans.
"""

from __future__ import annotations

import contextlib
import json
import queue
import time
import uuid
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

# Kill after these fractions of the time a complete apply took.
KILL_AT = [0.3, 0.6, 0.8, 0.92]
# Kill a revert of the full apply after this fraction of the apply's time.
REVERT_KILL_AT = 0.4
REPLY_TIMEOUT = 120


class Driven(RawServer):
    """A raw server process with tool calls that wait for their own reply."""

    next_id = 100

    def send_call(self, tool: str, arguments: dict[str, Any]) -> int:
        self.next_id += 1
        self.request(self.next_id, "tools/call", {"name": tool, "arguments": arguments})
        return self.next_id

    def wait_for(self, msg_id: int, timeout: float = REPLY_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no reply to request {msg_id}")
            message = json.loads(line)
            if message.get("id") == msg_id:
                return message
            if time.monotonic() > deadline:
                pytest.fail(f"no reply to request {msg_id}")

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

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        with contextlib.suppress(BrokenPipeError, OSError):
            self.close()


def start(env: dict[str, str]) -> Driven:
    server = Driven(env)
    assert "result" in server.initialize()
    return server


def crash_runs(env: dict[str, str], prefix: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One full apply to time it, then one killed apply per delay, each in its own project,
    then a killed revert of the full apply.

    Returns the full apply (with its project and time) and, per killed apply, its project, the
    schema hash before it, the delay and whether a reply came before the kill.
    """
    server = start(env)
    attempts: list[dict[str, Any]] = []
    try:
        # Time the apply once the model has loaded: a load still running beside the calibration
        # would slow it, and every kill time derived from it would then come too late.
        server.tool("recall_lessons", {"query": "wait for the model", "project": f"{prefix}-warm"})
        calibration = f"{prefix}-calibrate"
        base = server.tool("schema", {"project": calibration})["schema_hash"]
        plan = make_plan(base, *big_operations(), message="big insert")
        began = time.monotonic()
        applied = server.tool("apply", {"plan": plan, "project": calibration})
        full_time = time.monotonic() - began
        assert applied["effects"]["rows"]["inserted"] == ROWS
        applied.update(project=calibration, base=base, full_time=full_time)
        for n, fraction in enumerate(KILL_AT):
            if n:
                server = start(env)
            project = f"{prefix}-{n}"
            base = server.tool("schema", {"project": project})["schema_hash"]
            msg_id = server.send_call(
                "apply", {"plan": make_plan(base, *big_operations()), "project": project}
            )
            time.sleep(full_time * fraction)
            server.kill()
            attempts.append(
                {
                    "project": project,
                    "base": base,
                    "replied": server.replied(msg_id),
                    "delay": full_time * fraction,
                }
            )
        server = start(env)
        msg_id = server.send_call(
            "revert_commit", {"commit_id": applied["commit_id"], "project": calibration}
        )
        time.sleep(full_time * REVERT_KILL_AT)
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


def wait_until_postgres_is_quiet(url: str, timeout: float = 60) -> None:
    """Wait until no other session holds a transaction open (the killed server's is rolled back)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
            ).fetchone()[0]
            if busy == 0:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"{busy} Postgres sessions still busy {timeout} s after the kill")
            time.sleep(0.1)


def report(outcomes: list[str], attempts: list[dict[str, Any]]) -> None:
    delays = [round(a["delay"], 2) for a in attempts]
    print("crash outcomes:", list(zip(outcomes, [*delays, "revert"], strict=True)))


async def test_a_local_server_killed_mid_apply_leaves_all_or_nothing(
    tmp_path: Path, embedder: Embedder
) -> None:
    db = tmp_path / "lore.db"
    applied, attempts = crash_runs(server_env(db), "crash")
    assert sqlite_integrity(db) == "ok"
    store = open_local_store(db)
    try:
        outcomes = await check_consistent(store, embedder, applied, attempts)
    finally:
        store.close()
    report(outcomes, attempts)
    # The earliest kill came well before a full apply's time: the test must have caught one mid-way.
    assert outcomes[0] == "untouched", "the kill came too late to test anything; raise ROWS"


async def test_a_postgres_server_killed_mid_apply_leaves_all_or_nothing(
    tmp_path: Path, postgres_url: str, embedder: Embedder
) -> None:
    prefix = f"crash-{uuid.uuid4().hex[:10]}"  # other tests' projects may still be in the database
    env = server_env(tmp_path / "unused.db", LORE_STORE="postgres", LORE_DATABASE_URL=postgres_url)
    applied, attempts = crash_runs(env, prefix)
    wait_until_postgres_is_quiet(postgres_url)
    store = open_postgres_store(postgres_url)
    try:
        outcomes = await check_consistent(store, embedder, applied, attempts)
    finally:
        store.close()
    report(outcomes, attempts)
    assert outcomes[0] == "untouched", "the kill came too late to test anything; raise ROWS"
