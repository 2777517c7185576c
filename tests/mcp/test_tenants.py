"""A long plan holds nothing others need, and a stopped request never wedges the writer.

Issue 21, items 1 and 2: one org's heavy applies held the SQLite writer (or every pooled
Postgres connection) for their whole run, so another org's saves and key checks waited
behind them; and after deadline-stopped applies and an outside write on the same file,
every write of a SQLite team server answered UNAVAILABLE until restart. Both backends,
real MCP clients.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.transport.admission import HeavyGate
from lore_mcp.transport.server import LoreServer
from stores import deadline
from stores.engine import structured
from stores.sqlite import db as local_db
from tests.support.clients import connected
from tests.support.helpers import call
from tests.support.plans import apply_ops, column, cond, create_table, insert, make_plan, schema_hash
from tests.support.team import http_client, team_server

# Rows that make one ``like`` slow without backtracking (as in test_hardening_filters): each
# search for 197 a's and a b in 20,000 a's takes a few million steps (tens of ms); 5 a row
# over 60 rows make a plan of seconds, well past a deadline of 1 s.
SLOW_VALUE = "a" * 20_000 + "b"
SLOW_WHERE = [cond("v", "like", "%" + "a" * 197 + "b%")] * 5


def hold_first_run(
    monkeypatch: pytest.MonkeyPatch, table: str
) -> tuple[threading.Event, threading.Event, list[Any]]:
    """Hold the next plan run on ``table`` inside its run (its slot, snapshot and deadline
    taken) until ``release`` is set; ``running`` says it got there, later runs go through, and
    the list collects every run on ``table``. Not timed: how long a real plan takes depends on
    the machine (and a CPU-bound one slows other threads through the GIL), so a test that needs
    a call still running holds it instead."""
    running, release, runs = threading.Event(), threading.Event(), []
    execute = structured.execute

    def held_execute(source: Any, plan: Any, step: Any = None) -> Any:
        if any(op.get("table") == table for op in plan.operations):
            runs.append(plan)
            if not running.is_set():
                running.set()
                release.wait(60)
        return execute(source, plan, step)

    monkeypatch.setattr(structured, "execute", held_execute)
    return running, release, runs


async def test_a_long_apply_lets_other_writes_through_while_it_runs(
    server: LoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long plan is held inside its run (not timed: a CPU-bound plan also slows other
    threads through the GIL, which says nothing about locks) until the others have finished;
    if the apply held the writer or a pooled connection meanwhile, they would never finish."""
    async with connected(server) as setup:
        await apply_ops(setup, create_table("notes", column("v", "text")), insert("notes", {"v": "a"}))
        await apply_ops(setup, create_table("small", column("v", "text")))
    running, release, notes_runs = hold_first_run(monkeypatch, "notes")
    async with connected(server) as heavy, connected(server) as other:
        plan = make_plan(
            await schema_hash(heavy), {"op": "update", "table": "notes", "where": [], "set": {"v": "changed"}}
        )
        long_apply = asyncio.create_task(call(heavy, "apply", plan=plan))
        try:
            assert await asyncio.to_thread(running.wait, 30)

            async def others() -> tuple[dict[str, Any], dict[str, Any]]:
                saved = await call(
                    other, "save_lesson", problem="a save beside a long plan", resolution="it went"
                )
                voted = await call(other, "upvote_lesson", id=saved["id"])
                return voted, await apply_ops(other, insert("small", {"v": "a small plan beside a long one"}))

            voted, small = await asyncio.wait_for(others(), 30)
            assert not long_apply.done()
        finally:
            release.set()
        applied = await long_apply
    assert voted["upvotes"] == 1 and small["effects"]["rows"]["inserted"] == 1
    # The others touched neither the plan's table nor the schema: the long plan's result
    # stands as it ran, written after theirs (running it again would hold the writer as long).
    assert applied["effects"]["rows"]["updated"] == 1 and len(notes_runs) == 1
    assert applied["seq"] > small["seq"]


def test_a_cursor_left_open_by_a_failed_write_does_not_wedge_the_writer(tmp_path: Path) -> None:
    """What wedged the SQLite team server: a statement left unfinished on the writer (its
    cursor kept alive by a traceback) pins an old snapshot, and once another process has
    written, every ``BEGIN IMMEDIATE`` on that connection answers "locked" at once."""
    path = tmp_path / "lore.db"
    conn = local_db.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    kept = []
    with pytest.raises(RuntimeError), local_db.write_transaction(conn):
        cursor = conn.execute("SELECT x FROM t")
        cursor.fetchone()
        kept.append(cursor)  # as a traceback's frame would keep it
        raise RuntimeError("a request failed half-way")
    outside = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('INSERT INTO t VALUES (-1)').connection.commit()",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert outside.returncode == 0, outside.stderr
    with deadline.limit(5), local_db.write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (1000)")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 102
    conn.close()


# --- a team server: fair slots for heavy calls, BUSY, /healthz -----------------------------


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 30 s) until ``condition`` holds: the gate is in this process."""
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the heavy calls never reached the expected state")


ROWS = 3


async def notes_table(client: Client) -> None:
    await apply_ops(client, create_table("notes", column("v", "text")), insert("notes", *[{"v": "a"}] * ROWS))


async def rewrite_notes(client: Client) -> dict[str, Any]:
    """An apply that changes every row it finds, so one after it on the same table finds none."""
    plan = make_plan(
        await schema_hash(client),
        {"op": "update", "table": "notes", "where": [cond("v", "=", "a")], "set": {"v": "x"}},
    )
    return await call(client, "apply", plan=plan)


async def slow_apply(client: Client) -> dict[str, Any]:
    plan = make_plan(
        await schema_hash(client), {"op": "update", "table": "notes", "where": SLOW_WHERE, "set": {"v": "x"}}
    )
    return await call(client, "apply", plan=plan)


# The gate tests hold a slot with a real apply, held inside its run (hold_first_run) until the
# next calls have been admitted, queued or refused: on a busy machine as on a quiet one.


async def test_one_orgs_heavy_calls_past_its_share_are_busy_while_another_orgs_run(
    store: Any, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = HeavyGate(2, queue_per_org=1, max_wait_s=120)  # one slot for each org; one may wait
    with team_server(store, embedder, heavy_gate=gate) as server:
        acme, globex = server.keys.init_org("acme").key, server.keys.init_org("globex").key
        async with http_client(server.url, acme) as a1, http_client(server.url, globex) as g:
            await notes_table(a1)
            await notes_table(g)
            running, release, _ = hold_first_run(monkeypatch, "notes")
            async with http_client(server.url, acme) as a2, http_client(server.url, acme) as a3:
                first = asyncio.create_task(rewrite_notes(a1))
                try:
                    assert await asyncio.to_thread(running.wait, 30)
                    assert gate.load().running == 1
                    waiting = asyncio.create_task(rewrite_notes(a2))
                    await until(lambda: gate.load().waiting == 1)
                    health = httpx2.get(f"{server.base}/healthz", timeout=10)
                    with pytest.raises(MCPError) as refused:  # acme's queue is full
                        await a3.call_tool("query_rows", {"table": "notes"})
                    other = await rewrite_notes(g)  # globex's slot is its own
                    assert not first.done() and not waiting.done()
                finally:
                    release.set()
                outcomes = await asyncio.gather(first, waiting)
            assert health.status_code == 200 and health.json() == {"status": "ok"}  # a slot is free
            text = refused.value.error.message
            assert text.startswith("BUSY: The server is busy with other heavy work")
            assert "changed nothing" in text and re.search(r"Try again in \d+ s\.$", text)
            assert other["effects"]["rows"]["updated"] == ROWS
            # The waiting apply ran after the first had rewritten every row: none matched any more.
            assert [o["effects"]["rows"]["updated"] for o in outcomes] == [ROWS, 0]
            saved = await call(g, "save_lesson", problem="after the heavy work", resolution="still saves")
            assert saved["id"]


async def test_a_refused_heavy_call_gets_429_with_retry_after_and_its_id(
    store: Any, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = HeavyGate(1, queue_per_org=1, max_wait_s=120)
    with team_server(store, embedder, heavy_gate=gate) as server:
        key = server.keys.init_org("acme").key
        async with http_client(server.url, key) as a1, http_client(server.url, key) as a2:
            await notes_table(a1)
            running, release, _ = hold_first_run(monkeypatch, "notes")
            first = asyncio.create_task(rewrite_notes(a1))
            try:
                assert await asyncio.to_thread(running.wait, 30)
                waiting = asyncio.create_task(rewrite_notes(a2))
                await until(lambda: gate.load().waiting == 1)
                raw = httpx2.post(
                    server.url,
                    headers={
                        "Authorization": f"Bearer {key}",
                        "Accept": "application/json, text/event-stream",
                        "Content-Type": "application/json",
                        "MCP-Protocol-Version": "2025-11-25",
                    },
                    json={
                        "jsonrpc": "2.0",
                        "id": 77,
                        "method": "tools/call",
                        "params": {"name": "apply", "arguments": {}},
                    },
                    timeout=30,
                )
                health = httpx2.get(
                    f"{server.base}/healthz", headers={"Authorization": f"Bearer {key}"}, timeout=10
                )
            finally:
                release.set()
            await asyncio.gather(first, waiting)
    assert health.status_code == 200  # busy is not down
    assert health.json()["status"] == "busy"
    assert health.json()["heavy_calls"] == {"running": 1, "waiting": 1, "slots": 1}
    assert raw.status_code == 429
    assert int(raw.headers["retry-after"]) >= 1
    body = raw.json()
    assert body["id"] == 77
    assert body["error"]["message"].startswith("BUSY: ")


async def test_healthz_fails_when_writes_cannot_begin(
    store: Any, embedder: Embedder, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "local":
        pytest.skip("the stuck writer is SQLite's one writer connection")
    import stores.sqlite.lessons

    monkeypatch.setattr(stores.sqlite.lessons, "PROBE_WAIT_S", 0.3)
    with team_server(store, embedder) as server:
        key = server.keys.init_org("local").key
        healthy = httpx2.get(f"{server.base}/healthz", timeout=10)
        with store._backend.conns.write_lock:  # a writer that never lets go
            stuck = httpx2.get(
                f"{server.base}/healthz", headers={"Authorization": f"Bearer {key}"}, timeout=10
            )
        again = httpx2.get(f"{server.base}/healthz", timeout=10)
    assert healthy.status_code == 200 and again.status_code == 200
    assert stuck.status_code == 503
    assert "writer" in stuck.json()["detail"]


async def test_saves_keep_working_after_stopped_applies_and_an_outside_write(
    store: Any, embedder: Embedder, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The sequence that wedged a SQLite team server: three concurrent applies stopped at the
    deadline, then an administrator's `lore-memory keys create` on the same database, then
    saves from two orgs; every one of those saves must succeed."""
    with team_server(store, embedder, request_timeout_s=1.0) as server:
        acme, globex = server.keys.init_org("acme").key, server.keys.init_org("globex").key
        async with http_client(server.url, acme) as setup:
            await apply_ops(
                setup, create_table("notes", column("v", "text")), insert("notes", *[{"v": SLOW_VALUE}] * 60)
            )
        clients = [http_client(server.url, acme) for _ in range(3)]
        async with clients[0] as c0, clients[1] as c1, clients[2] as c2:
            stopped = await asyncio.gather(*(slow_apply(c) for c in (c0, c1, c2)), return_exceptions=True)
        assert all(getattr(s, "code", None) == "UNAVAILABLE" for s in stopped), stopped
        env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
        if backend == "postgres":
            env.update(LORE_STORE="postgres", LORE_DATABASE_URL=request.getfixturevalue("postgres_url"))
        else:
            env.update(LORE_DB_PATH=str(tmp_path / "lore.db"))
        created = subprocess.run(
            [sys.executable, "-m", "lore_mcp", "keys", "create", "--name", "admin-made"],
            env={**env, "LORE_ORG": "acme", "HF_HUB_OFFLINE": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert created.returncode == 0, created.stderr
        for key in (acme, globex, acme, globex):
            async with http_client(server.url, key) as client:
                for i in range(3):
                    saved = await call(
                        client, "save_lesson", problem=f"after the outside write {i}", resolution="ok"
                    )
                    assert saved["id"]
        assert httpx2.get(f"{server.base}/healthz", timeout=10).status_code == 200
