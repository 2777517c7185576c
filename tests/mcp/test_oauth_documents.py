"""Fetching client ID metadata documents (``MetadataDocuments``) from a local HTTPS server that
drips, holds or refuses: the fetch has one total deadline, a bounded number run at once, and
a refusal is remembered. Loopback is allowed only by the test-only ``allow_private``."""

from __future__ import annotations

import ssl
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from lore_mcp.transport.oauth import clients
from lore_mcp.transport.oauth.clients import DocumentRefused, MetadataDocuments
from tests.support.oauth import REDIRECT, self_signed, serve_in_thread
from tests.support.team import free_port


class Documents:
    """The server's side: requests seen by path, and the event that releases held ones."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.hosts: set[str] = set()
        self.release = threading.Event()
        self.held = threading.Semaphore(0)

    async def drip(self, request: Request) -> Response:
        async def forever() -> AsyncIterator[bytes]:
            while True:
                yield b" "
                await anyio.sleep(0.05)

        return StreamingResponse(forever(), media_type="application/json")

    async def missing(self, request: Request) -> Response:
        self.hits[request.url.path] += 1
        return Response(status_code=404)

    async def held_document(self, request: Request) -> Response:
        self.hosts.add(request.headers["host"])
        self.held.release()
        await anyio.to_thread.run_sync(self.release.wait)
        url = f"https://{request.headers['host']}{request.url.path}"
        return JSONResponse({"client_id": url, "redirect_uris": [REDIRECT]})


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Documents, str, MetadataDocuments]]:
    """The documents server on ``https://localhost:port``, and a fetcher that trusts it."""
    cert, key = self_signed(tmp_path)
    documents, port = Documents(), free_port()
    routes = [
        Route("/drip.json", documents.drip),
        Route("/missing.json", documents.missing),
        Route("/held/{n}.json", documents.held_document),
    ]
    with serve_in_thread(Starlette(routes=routes), port, ssl_certfile=cert, ssl_keyfile=key):
        fetcher = MetadataDocuments(allow_private=True, verify=ssl.create_default_context(cafile=cert))
        try:
            yield documents, f"https://localhost:{port}", fetcher
        finally:
            documents.release.set()


async def test_a_dripping_document_is_refused_at_the_total_deadline(
    served: tuple[Documents, str, MetadataDocuments], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One byte every 50 ms never trips a per-read timeout; the deadline counts the whole fetch."""
    _, base, fetcher = served
    monkeypatch.setattr(clients, "CIMD_TIMEOUT_S", 0.5)
    with anyio.fail_after(60):
        assert await fetcher.client(f"{base}/drip.json") is None
    with pytest.raises(DocumentRefused, match=r"did not arrive within 0\.5 seconds"):
        await fetcher.fetch(f"{base}/drip.json")


async def test_a_refused_document_is_remembered_and_not_fetched_again(
    served: tuple[Documents, str, MetadataDocuments],
) -> None:
    documents, base, fetcher = served
    for _ in range(5):
        assert await fetcher.client(f"{base}/missing.json") is None
    assert documents.hits["/missing.json"] == 1
    with pytest.raises(DocumentRefused, match="it answered HTTP 404"):
        await fetcher.fetch(f"{base}/missing.json")


async def test_fetches_beyond_the_limit_are_refused_at_once_not_queued(
    served: tuple[Documents, str, MetadataDocuments], monkeypatch: pytest.MonkeyPatch
) -> None:
    documents, base, fetcher = served
    monkeypatch.setattr(clients, "CIMD_CONCURRENT", 2)
    fetched: list[str] = []

    async def fetch(url: str) -> None:
        fetched.append((await fetcher.fetch(url)).client_id)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for n in (1, 2):
                group.start_soon(fetch, f"{base}/held/{n}.json")
            for _ in (1, 2):  # both requests are at the server, held there
                await anyio.to_thread.run_sync(documents.held.acquire)
            with pytest.raises(DocumentRefused, match="too many client documents at once"):
                await fetcher.fetch(f"{base}/held/3.json")
            documents.release.set()
    assert sorted(fetched) == [f"{base}/held/1.json", f"{base}/held/2.json"]
    # Connected to the checked address, the request still names the host (TLS verified it too).
    assert documents.hosts == {base.removeprefix("https://")}
