"""Pure-Python bulk work spread over every core, results in order.

An import checks and redacts each line in Python (about 0.1 ms), so one process keeps one core
busy while the others wait: a million lines spent minutes there. Work beyond the first chunk goes
to worker processes started by ``spawn`` (none of this process's threads, connections or model is
copied), so a small import never pays their start (about a second)."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

CHUNK = 2_000  # items a worker takes at a time: a few hundred ms of checking


def in_order(work: Callable[[list[T]], list[R]], items: Iterable[T]) -> Iterator[R]:
    """``work`` over ``items`` a chunk at a time, the first here and the rest in worker processes
    (``work`` must be a module-level function), yielded in order; at most two chunks a core wait."""
    source = iter(items)
    chunks = iter(lambda: list(itertools.islice(source, CHUNK)), [])
    yield from work(next(chunks, []))
    following = next(chunks, None)
    if following is None:
        return
    rest, workers = itertools.chain([following], chunks), os.cpu_count() or 1
    if workers == 1:
        for piece in rest:
            yield from work(piece)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_leave_interrupts)
    try:
        pending: deque[Future[list[R]]] = deque()
        for piece in rest:
            pending.append(pool.submit(work, piece))
            if len(pending) > 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        pool.shutdown(cancel_futures=True)


def _leave_interrupts() -> None:
    """A worker ignores Ctrl-C, which reaches every process of the terminal's group: the parent
    stops the work (cancelling what has not begun), and no worker prints a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
