"""Lesson ids: ULIDs ordered even within a millisecond (plain ones are random there), as pages list by id."""

from __future__ import annotations

import threading
from datetime import datetime

from ulid import ULID

_lock = threading.Lock()
_last = 0


def new_id(created: datetime | None = None) -> str:
    """A ULID for ``created`` (now by default), greater than every id this process made before."""
    global _last
    candidate = int(ULID.from_datetime(created) if created is not None else ULID())
    with _lock:
        if created is None and candidate <= _last:
            candidate = _last + 1
        _last = max(_last, candidate)
    return str(ULID.from_int(candidate))
