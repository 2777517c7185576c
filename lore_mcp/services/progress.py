"""How a long service call reports progress: ``report(done, total)``, awaited between steps."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

Progress = Callable[[int, int], Coroutine[Any, Any, None]]


async def no_progress(done: int, total: int) -> None:
    """Nobody asked."""
