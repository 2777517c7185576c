"""A per-request deadline that store work checks itself: cancelling a coroutine does not stop its
worker thread, so the deadline travels in a context variable (``to_thread`` copies it) and long work
reads it. ``DeadlineExceeded`` is raised inside the transaction, which rolls back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import TypeVar

from stores.errors import UnavailableError

_T = TypeVar("_T")

# The monotonic time by which the current request must be answered; None: no limit.
_DEADLINE: ContextVar[float | None] = ContextVar("lore_deadline", default=None)

MESSAGE = (
    "The request took longer than this server allows and was stopped; it changed nothing. "
    "Narrow the filter, split the plan into smaller ones, or try again when the server is less busy."
)


class DeadlineExceeded(UnavailableError):
    """The request's deadline passed; the work was stopped and rolled back."""

    def __init__(self, message: str = MESSAGE) -> None:
        super().__init__(message)


@contextlib.contextmanager
def limit(seconds: float | None) -> Iterator[None]:
    """Run the block under a deadline ``seconds`` from now (None: none new); a sooner one stays."""
    if seconds is None:
        yield
        return
    new = time.monotonic() + max(seconds, 0.0)
    current = _DEADLINE.get()
    token = _DEADLINE.set(new if current is None else min(current, new))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left before the deadline (negative once passed); None when there is none."""
    at = _DEADLINE.get()
    return None if at is None else at - time.monotonic()


def expired() -> bool:
    at = _DEADLINE.get()
    return at is not None and time.monotonic() >= at


def check() -> None:
    """Raise ``DeadlineExceeded`` once the deadline has passed; cheap enough for every row."""
    if expired():
        raise DeadlineExceeded()


def checked(items: Iterable[_T]) -> Iterator[_T]:
    """``items``, with ``check`` before each: for a loop of many cheap steps."""
    for item in items:
        check()
        yield item
