"""Lore's backends: persistence, search, scoping. Nothing in here knows MCP.

Both open a ``Store`` (``stores.store``). Backends are imported lazily by
``open_local_store`` and ``open_postgres_store``, so that running on SQLite never pays
for the Postgres imports and vice versa.
"""

from __future__ import annotations

from pathlib import Path

from stores.engine.activity import ActivityBounds
from stores.engine.lessons import LessonStore, Scope
from stores.engine.ranking import RankingParams
from stores.errors import ConflictError, InvalidInputError, NotFoundError, StoreError, UnavailableError
from stores.store import Store

__all__ = [
    "ActivityBounds",
    "ConflictError",
    "InvalidInputError",
    "LessonStore",
    "NotFoundError",
    "RankingParams",
    "Scope",
    "Store",
    "StoreError",
    "UnavailableError",
    "open_local_store",
    "open_postgres_store",
]


def open_local_store(
    path: Path | str,
    *,
    ranking_params: RankingParams | None = None,
    activity_bounds: ActivityBounds | None = None,
) -> Store:
    """Open (creating and migrating as needed) the SQLite store at ``path``; ``activity_bounds``
    says how much activity log each project keeps (``stores.engine.activity``)."""
    from stores.sqlite.lessons import LocalLessonStore

    return LocalLessonStore(path, ranking_params=ranking_params, activity_bounds=activity_bounds)


def open_postgres_store(
    url: str,
    *,
    pool_size: int = 5,
    ranking_params: RankingParams | None = None,
    activity_bounds: ActivityBounds | None = None,
    read_url: str | None = None,
    direct_url: str | None = None,
) -> Store:
    """Connect to Postgres (migrating it as needed) at ``url``; reads may go to the replica at
    ``read_url``, and ``direct_url`` says ``url`` is a pooler's (``stores.postgres.routing``)."""
    try:
        from stores.postgres.lessons import PostgresLessonStore
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise UnavailableError(
            f"The Postgres backend needs extra packages ({exc.name} is missing): "
            "pip install 'lore-memory-mcp[postgres]'."
        ) from exc
    return PostgresLessonStore(
        url,
        pool_size=pool_size,
        ranking_params=ranking_params,
        activity_bounds=activity_bounds,
        read_url=read_url,
        direct_url=direct_url,
    )
