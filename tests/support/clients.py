"""Holding MCP clients open in tests."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator, Iterator

from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning


@contextlib.asynccontextmanager
async def connected(target: object, mode: str = "auto") -> AsyncIterator[Client]:
    """Hold a ``Client`` open in a task of its own; ``mode`` is the ``Client``'s (``"legacy"``:
    the initialize handshake, a revision such as ``"2026-07-28"``: that one, ``"auto"``: discover).

    pytest-asyncio may tear a fixture down in another task than set it up, and
    the client's cancel scopes must be exited where they were entered.
    """
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        try:
            async with Client(target, mode=mode) as c:  # type: ignore[arg-type]
                ready.set_result(c)
                await done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await ready
    finally:
        done.set()
        await task


@contextlib.contextmanager
def no_deprecation_warnings() -> Iterator[None]:
    """The SDK flags logging/setLevel and resources/subscribe as gone in the 2026-07-28 revision;
    they are current on the revisions clients speak today."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield
