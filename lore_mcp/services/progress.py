"""How a long service call says how far it is: ``report(done, total)``, awaited between steps.

The tools pass one that sends MCP progress on the request's own token and stream (nothing when
the request carries none); everything else passes ``no_progress``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

Progress = Callable[[int, int], Coroutine[Any, Any, None]]


async def no_progress(done: int, total: int) -> None:
    """Nobody asked."""
