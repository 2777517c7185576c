"""Progress and cancellation of long tool calls, through real MCP clients in both eras.

``legacy`` is the initialize handshake (cancellation is ``notifications/cancelled``); the
2026-07-28 revision has no sessions and cancels structurally (in process, the client's
await is the handler's; over HTTP, closing the request's stream).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client, types

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import IMPORT_EMBED_BATCH
from lore_mcp.transport.server import LoreServer
from stores.engine import structured as engine_structured
from stores.ids import new_id
from tests.support.helpers import call
from tests.support.plans import column, create_table, insert, make_plan, schema_hash

MODES = ["legacy", "2026-07-28"]
N = 100  # one import_lessons call at its largest: four groups of IMPORT_EMBED_BATCH


def lessons(n: int) -> list[dict[str, Any]]:
    """``n`` distinct lessons as export_lessons gives them (nothing for dedup to merge)."""
    return [
        {
            "id": new_id(),
            "problem": f"Import check {i}: the nightly job number {i} stalls on shard {i * 7}",
            "resolution": f"Restart worker {i} after raising its queue limit to {i * 13}",
        }
        for i in range(n)
    ]


async def stored(client: Client) -> int:
    """How many lessons the default project holds."""
    count, cursor = 0, None
    while True:
        page = await call(client, "export_lessons", limit=100, **({"cursor": cursor} if cursor else {}))
        count += len(page["lessons"])
        cursor = page["next_cursor"]
        if cursor is None:
            return count


class Notices:
    """Every server notification a client saw, and the progress reported to one call."""

    def __init__(self) -> None:
        self.all: list[Any] = []
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.first = asyncio.Event()

    async def on_message(self, message: Any) -> None:
        self.all.append(message)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))
        self.first.set()


@pytest.mark.parametrize("mode", MODES)
async def test_import_reports_progress_with_totals_to_a_call_with_a_token(
    server: LoreServer, mode: str
) -> None:
    notices = Notices()
    async with Client(server, mode=mode, message_handler=notices.on_message) as client:
        result = await client.call_tool(
            "import_lessons", {"lessons": lessons(N)}, progress_callback=notices.on_progress
        )
        assert not result.is_error, result.content
        assert result.structured_content is not None and result.structured_content["added"] == N
        assert await stored(client) == N
    done = [p for p, _, _ in notices.progress]
    assert len(done) == N // IMPORT_EMBED_BATCH  # one per group; the last once the write committed
    assert done == sorted(set(done)), "progress only increases"
    assert {t for _, t, _ in notices.progress} == {N}
    assert notices.progress[-1][:2] == (N, N)
    assert notices.progress[-1][2] == f"{N} of {N} lessons"


@pytest.mark.parametrize("mode", MODES)
async def test_import_without_a_token_sends_no_progress(server: LoreServer, mode: str) -> None:
    notices = Notices()
    async with Client(server, mode=mode, message_handler=notices.on_message) as client:
        result = await client.call_tool("import_lessons", {"lessons": lessons(N)})
        assert not result.is_error, result.content
        assert await stored(client) == N
    assert not [m for m in notices.all if isinstance(m, types.ProgressNotification)]


class HeldEmbedder:
    """Wraps the real embedder's ``encode_documents``: the second call (the import's second
    group) says it began and waits until released, so a test can cancel an import while it is
    known to be in that group, with no progress token that could fail the call another way."""

    def __init__(self, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
        self.encode = embedder.encode_documents
        self.calls = 0
        self.second = threading.Event()
        self.release = threading.Event()
        monkeypatch.setattr(embedder, "encode_documents", self.encode_documents)

    def encode_documents(self, texts: Sequence[str], *, bulk: bool = False) -> list[np.ndarray]:
        self.calls += 1
        if self.calls == 2:
            self.second.set()
            self.release.wait(30)
        return self.encode(texts, bulk=bulk)


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_import_stops_between_groups_and_changes_nothing(
    server: LoreServer, service: LessonService, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Client(server, mode=mode) as client:
        before = await stored(client)
        held = HeldEmbedder(service.embedder, monkeypatch)
        scope = anyio.CancelScope()

        async def importing() -> None:
            with scope:
                await client.call_tool("import_lessons", {"lessons": lessons(N)})

        async with anyio.create_task_group() as tg:
            tg.start_soon(importing)
            assert await anyio.to_thread.run_sync(held.second.wait, 30), "the import never reached group 2"
            # legacy: the client sends notifications/cancelled; 2026-07-28 in process: the handler
            # runs under the caller's await, so the caller's cancel scope is the handler's
            scope.cancel()
            await anyio.sleep(0.5)  # the server has seen the cancel while the second group is held
            held.release.set()
        await asyncio.sleep(2)  # ample for the two groups and the write a missed cancel would run
        assert held.calls == 2, "the import went on past the group it was in"
        assert await stored(client) == before


def table_plan(base: str, inserts: int, rows_each: int) -> dict[str, Any]:
    """A table created, then ``inserts`` inserts of ``rows_each`` rows."""
    ops = [create_table("runs", column("n", "integer"))]
    ops += [insert("runs", *({"n": i * rows_each + j} for j in range(rows_each))) for i in range(inserts)]
    return make_plan(base, *ops)


@pytest.mark.parametrize("mode", MODES)
async def test_a_large_apply_reports_rows_done_after_each_operation(server: LoreServer, mode: str) -> None:
    notices = Notices()
    async with Client(server, mode=mode) as client:
        plan = table_plan(await schema_hash(client), inserts=4, rows_each=100)
        result = await client.call_tool("apply", {"plan": plan}, progress_callback=notices.on_progress)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        assert result.structured_content["effects"]["rows"]["inserted"] == 400
    total = 1 + 400  # create_table weighs one, an insert its rows
    assert [(p, t) for p, t, _ in notices.progress] == [
        (1, total),
        (101, total),
        (201, total),
        (301, total),
        (total, total),
    ]
    assert notices.progress[-1][2] == f"{total} of {total} rows"


@pytest.mark.parametrize("mode", MODES)
async def test_a_small_apply_or_one_without_a_token_reports_nothing(server: LoreServer, mode: str) -> None:
    notices = Notices()
    async with Client(server, mode=mode, message_handler=notices.on_message) as client:
        small = table_plan(await schema_hash(client), inserts=1, rows_each=10)
        result = await client.call_tool("apply", {"plan": small}, progress_callback=notices.on_progress)
        assert not result.is_error, result.content
        large = make_plan(await schema_hash(client), insert("runs", *({"n": j} for j in range(300))))
        result = await client.call_tool("apply", {"plan": large})
        assert not result.is_error, result.content
    assert not notices.progress
    assert not [m for m in notices.all if isinstance(m, types.ProgressNotification)]


class HeldPlan:
    """Wraps ``structured.run_plan``: after a plan's second operation ran (on its worker thread,
    before the commit is written) it says so and waits until released, so a test can cancel a
    large apply while it is known to be between operations."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.run_plan = engine_structured.run_plan
        self.after_second = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        monkeypatch.setattr(engine_structured, "run_plan", self.held)

    def held(self, snap: Any, raw: Any, step: Any) -> Any:
        def holding_step(index: int) -> None:
            if step is not None:
                step(index)
            if index == 1:
                self.after_second.set()
                self.release.wait(30)

        ran = self.run_plan(snap, raw, holding_step)
        self.finished.set()
        return ran


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_apply_writes_nothing(
    server: LoreServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Client(server, mode=mode) as client:
        base = await schema_hash(client)
        commits = len((await call(client, "history", limit=50))["commits"])
        held = HeldPlan(monkeypatch)
        scope = anyio.CancelScope()

        async def applying() -> None:
            with scope:
                await client.call_tool("apply", {"plan": table_plan(base, inserts=4, rows_each=100)})

        async with anyio.create_task_group() as tg:
            tg.start_soon(applying)
            assert await anyio.to_thread.run_sync(held.after_second.wait, 30), (
                "the apply never ran its operations"
            )
            scope.cancel()
            await anyio.sleep(0.5)  # the server has seen the cancel while the plan is held
            held.release.set()
        assert await anyio.to_thread.run_sync(held.finished.wait, 30)
        await asyncio.sleep(2)  # ample for the commit a missed cancel would write
        assert await schema_hash(client) == base
        assert len((await call(client, "history", limit=50))["commits"]) == commits
