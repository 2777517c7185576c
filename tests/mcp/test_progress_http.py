"""Progress and cancellation over real streamable HTTP, in both eras.

In process (``test_progress``) the 2026-07-28 client's cancel is the handler's own cancel
scope; here it is what the revision says a client does: it closes the request's stream, and
the server must notice that and stop. The legacy era sends ``notifications/cancelled``.
"""

from __future__ import annotations

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lore_mcp.embedding.embedder import Embedder
from stores.store import Store
from tests.mcp.test_progress import MODES, HeldEmbedder, N, Notices, lessons, stored
from tests.support.team import team_server


def http(key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.mark.parametrize("mode", MODES)
async def test_import_over_http_reports_progress_with_totals(
    store: Store, embedder: Embedder, mode: str
) -> None:
    notices = Notices()
    with team_server(store, embedder) as team:
        key = team.keys.init_org("acme").key
        async with (
            http(key) as transport,
            Client(streamable_http_client(team.url, http_client=transport), mode=mode) as client,
        ):
            result = await client.call_tool(
                "import_lessons", {"lessons": lessons(N)}, progress_callback=notices.on_progress
            )
            assert not result.is_error, result.content
            assert await stored(client) == N
    assert [(p, t) for p, t, _ in notices.progress] == [(25, N), (50, N), (75, N), (100, N)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_import_over_http_stops_and_changes_nothing(
    store: Store, embedder: Embedder, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with team_server(store, embedder) as team:
        key = team.keys.init_org("acme").key
        async with (
            http(key) as transport,
            Client(streamable_http_client(team.url, http_client=transport), mode=mode) as client,
        ):
            before = await stored(client)
            held = HeldEmbedder(embedder, monkeypatch)
            scope = anyio.CancelScope()

            async def importing() -> None:
                with scope:
                    await client.call_tool("import_lessons", {"lessons": lessons(N)})

            async with anyio.create_task_group() as tg:
                tg.start_soon(importing)
                assert await anyio.to_thread.run_sync(held.second.wait, 30), (
                    "the import never reached group 2"
                )
                # legacy: notifications/cancelled; 2026-07-28: the client closes the request's stream
                scope.cancel()
                await anyio.sleep(1)  # the server has seen the cancel while the second group is held
                held.release.set()
            await anyio.sleep(2)  # ample for the two groups and the write a missed cancel would run
            assert held.calls == 2, "the import went on past the group it was in"
            assert await stored(client) == before
