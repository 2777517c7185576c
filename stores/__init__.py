"""Lore's backends: persistence, search, scoping. Nothing in here knows MCP.

Backends are imported lazily by ``open_lesson_store`` so that running on SQLite
never pays for the Postgres imports and vice versa.
"""

from __future__ import annotations

from pathlib import Path

from stores.errors import ConflictError, InvalidInputError, NotFoundError, StoreError, UnavailableError
from stores.lessons import LessonStore, Scope
from stores.ranking import RankingParams

__all__ = [
    "ConflictError",
    "InvalidInputError",
    "LessonStore",
    "NotFoundError",
    "RankingParams",
    "Scope",
    "StoreError",
    "UnavailableError",
    "open_local_store",
]


def open_local_store(path: Path | str, *, ranking_params: RankingParams | None = None) -> LessonStore:
    """Open (creating and migrating as needed) the SQLite store at ``path``."""
    from stores.local_lessons import LocalLessonStore

    return LocalLessonStore(path, ranking_params=ranking_params)
