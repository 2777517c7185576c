"""Admission for expensive tool calls, so that one org's heavy work cannot stall another's (twelve heavy
``apply`` calls of one org once held every pooled Postgres connection). A ``heavy`` tool takes a slot:
``total`` (below the pool, so cheap calls find a connection), ``per_org``, ``per_key``. Waiters go FIFO up
to ``max_wait_s`` and ``queue_per_org``; past either, ``BUSY``, which touches no database, so load is never
mistaken for an outage."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from lore_mcp.errors import BUSY, LoreError
from stores import deadline

QUEUE_FULL = "this org already has the most heavy calls waiting"


class Busy(LoreError):
    code = BUSY

    def __init__(self, retry_after_s: int, *, why: str) -> None:
        super().__init__(
            f"The server is busy with other heavy work ({why}); this call was not started and "
            f"changed nothing. Try again in {retry_after_s} s."
        )
        self.retry_after_s = retry_after_s


@dataclass
class _Waiter:
    org: str
    key: str
    ready: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class Load:
    """What the gate holds right now, for ``/healthz`` and ``doctor``."""

    running: int
    waiting: int
    total: int

    @property
    def saturated(self) -> bool:
        return self.running >= self.total and self.waiting > 0


class HeavyGate:
    def __init__(
        self,
        total: int,
        *,
        per_org: int | None = None,
        per_key: int | None = None,
        queue_per_org: int = 8,
        max_wait_s: float = 10.0,
    ) -> None:
        if total < 1:
            raise ValueError("a gate needs at least one slot")
        self.total = total
        # One org may fill the gate only when it is the sole slot; otherwise it leaves one free.
        self.per_org = per_org if per_org is not None else max(1, total - 1)
        self.per_key = per_key if per_key is not None else self.per_org
        self.queue_per_org, self.max_wait_s = queue_per_org, max_wait_s
        self._running: Counter[str] = Counter()
        self._waiting: deque[_Waiter] = deque()

    def load(self) -> Load:
        return Load(running=self._running["*"], waiting=len(self._waiting), total=self.total)

    def queue_full(self, org: str) -> bool:
        """Whether a heavy call of ``org`` would be refused at once (its queue is full)."""
        return sum(w.org == org for w in self._waiting) >= self.queue_per_org

    def retry_after_s(self) -> int:
        """A hint in whole seconds: half the longest a waiter here may wait, at least one."""
        return max(1, math.ceil(self.max_wait_s / 2))

    def _may_run(self, org: str, key: str) -> bool:
        return (
            self._running["*"] < self.total
            and self._running[f"org:{org}"] < self.per_org
            and self._running[f"key:{key}"] < self.per_key
        )

    def _take(self, org: str, key: str) -> None:
        self._running.update(("*", f"org:{org}", f"key:{key}"))

    def _give_back(self, org: str, key: str) -> None:
        """Free the slot, then start the earliest waiters that may run now, in order of arrival."""
        self._running.subtract(("*", f"org:{org}", f"key:{key}"))
        for waiter in list(self._waiting):
            if not waiter.ready.done() and self._may_run(waiter.org, waiter.key):
                self._take(waiter.org, waiter.key)
                waiter.ready.set_result(None)
                self._waiting.remove(waiter)

    @contextlib.asynccontextmanager
    async def slot(self, org: str, key: str) -> AsyncIterator[None]:
        """Hold a slot for the block; raises ``Busy`` when none comes in time."""
        blocked = any(w.org == org or w.key == key for w in self._waiting)
        if blocked or not self._may_run(org, key):
            await self._wait(org, key)
        else:
            self._take(org, key)
        try:
            yield
        finally:
            self._give_back(org, key)

    async def _wait(self, org: str, key: str) -> None:
        if self.queue_full(org):
            raise Busy(self.retry_after_s(), why=QUEUE_FULL)
        waiter = _Waiter(org, key)
        self._waiting.append(waiter)
        left = deadline.remaining()
        wait = self.max_wait_s if left is None else max(0.0, min(self.max_wait_s, left - 1.0))
        try:
            await asyncio.wait_for(asyncio.shield(waiter.ready), timeout=wait)
        except TimeoutError:
            if waiter.ready.done():  # granted just as the wait ran out: keep it
                return
            self._waiting.remove(waiter)
            raise Busy(self.retry_after_s(), why="every slot for heavy calls stayed taken") from None
        except BaseException:
            if waiter.ready.done():
                self._give_back(org, key)  # cancelled after the grant: hand the slot on
            else:
                self._waiting.remove(waiter)
            raise
