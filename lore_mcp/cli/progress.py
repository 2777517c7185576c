"""``import``/``reembed`` progress on stderr: tqdm on a terminal, else a line a batch (a log can't redraw)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Protocol


class Counter(Protocol):
    """What a command's callbacks drive: the total once known, then each batch done."""

    def reset(self, total: int) -> None: ...

    def update(self, n: int) -> None: ...


class LineCounter:
    """One stderr line per batch, ``done/total``, for a stderr that is not a terminal."""

    def __init__(self, command: str) -> None:
        self.command, self.done, self.total = command, 0, 0

    def reset(self, total: int) -> None:
        self.done, self.total = 0, total

    def update(self, n: int) -> None:
        self.done += n
        print(f"lore-memory: {self.command}: {self.done}/{self.total} lessons", file=sys.stderr, flush=True)


@contextlib.contextmanager
def counter(command: str) -> Iterator[Counter]:
    """A redrawn counter on a terminal, else a ``LineCounter``; ``command`` names the lines."""
    if not sys.stderr.isatty():
        yield LineCounter(command)
        return
    from tqdm import tqdm

    with tqdm(unit="lesson", file=sys.stderr) as bar:
        yield bar
