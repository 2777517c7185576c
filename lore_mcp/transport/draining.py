"""Shutdown that drains: SIGTERM stops new connections, lets MCP requests in flight finish for up
to the drain time, then exits whatever is still running (``DrainingServer``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import uvicorn

logger = logging.getLogger("lore_mcp.transport.http")

# How long SIGTERM waits for MCP requests in flight before closing everything anyway.
DRAIN_TIMEOUT_S = 30.0
# After the drain time, this long for the rest of shutdown before the process exits regardless.
EXIT_GRACE_S = 2.0
# The exit status when requests or shutdown were still running at the deadline (0 after a clean drain).
EXIT_AFTER_DEADLINE = 1


class InFlightCount(Protocol):
    """How many MCP requests are running (``http.RequestCounter``)."""

    active: int


class DrainingServer(uvicorn.Server):
    """uvicorn, but shutdown waits for MCP requests, not every connection (a GET stream lives as long as
    its session). Bounded: a thread blocked on a silent database cannot be cancelled and would hold the
    exit, so past the drain time the process exits, and a timer ``EXIT_GRACE_S`` later if anything still
    holds it (``hard_exit=False``: neither, inside another program)."""

    def __init__(
        self,
        config: uvicorn.Config,
        counter: InFlightCount,
        *,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
        hard_exit: bool = True,
        closing: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.counter = counter
        self.closing = closing
        self.drain_timeout_s = drain_timeout_s
        self.hard_exit = hard_exit

    async def shutdown(self, sockets: Any = None) -> None:
        if self.hard_exit:
            timer = threading.Timer(
                self.drain_timeout_s + EXIT_GRACE_S, _exit_now, args=("shutdown did not finish in time",)
            )
            timer.daemon = True
            timer.start()
        if self.closing is not None:
            self.closing()
        await super().shutdown(sockets)
        # uvicorn re-raises the caught signal ("killed by SIGTERM"); after a clean drain, exit 0 instead.
        self._captured_signals.clear()

    async def _wait_tasks_to_complete(self) -> None:
        deadline = time.monotonic() + self.drain_timeout_s
        while self.counter.active and time.monotonic() < deadline and not self.force_exit:
            await asyncio.sleep(0.05)
        if self.counter.active:
            message = f"{self.counter.active} MCP requests still running after {self.drain_timeout_s:g} s"
            if self.hard_exit:
                _exit_now(message)
            logger.error("shutting down with %s", message)


def _exit_now(why: str) -> None:
    """Leave at once, without waiting for threads that may never finish."""
    logger.error("exiting without waiting: %s", why)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(EXIT_AFTER_DEADLINE)
