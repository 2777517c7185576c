"""Lore's backends: persistence, search, scoping; nothing here knows MCP. Both open a ``Store``,
imported lazily so SQLite never pays for Postgres's imports."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.engine.activity import KINDS as ACTIVITY_KINDS
from stores.engine.activity import (
    ROOT_ONLY_KINDS,
    ActivityBounds,
    ActivityEntry,
    ActivityNote,
    ActivityQuery,
    Recalled,
    StaleLesson,
)
from stores.engine.dedup import restates
from stores.engine.keys import ApiKey, KeyStore, Org
from stores.engine.lessons import KINDS as LESSON_KINDS
from stores.engine.lessons import (
    MAX_LIST_LIMIT,
    MAX_RECALL_LIMIT,
    MAX_SHORT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    Lesson,
    LessonDraft,
    LessonPatch,
    RecallQuery,
    SaveResult,
    Scope,
    ScoredLesson,
)
from stores.engine.oauth_rows import OAuthCode, OAuthGrant, OAuthTokenRow
from stores.engine.plans import IDENTIFIER, MAX_MESSAGE_CHARS, PlanError
from stores.errors import ConflictError, InvalidInputError, NotFoundError, StoreError, UnavailableError
from stores.sqlite.files import Unwritable, unwritable

if TYPE_CHECKING:  # imported on first use at run time (``__getattr__``)
    from stores.engine import history, queries, structured
    from stores.engine.embedding_model import (
        MAX_FINISH_ROUNDS,
        EmbeddingModel,
        ModelChangedError,
        ModelRecords,
    )
    from stores.engine.lesson_rules import CallCounts, NoticeFeed
    from stores.engine.ranking import RankingParams, weight
    from stores.engine.structured import Commit, ProjectTx, StalePlanError
    from stores.store import Store

# These load numpy and the lesson store's modules, which a stdio server's handshake need not wait for.
_LATER = {
    "stores.engine.embedding_model": "MAX_FINISH_ROUNDS EmbeddingModel ModelChangedError ModelRecords",
    "stores.engine.lesson_rules": "CallCounts NoticeFeed",
    "stores.engine.ranking": "RankingParams weight",
    "stores.engine.structured": "Commit ProjectTx StalePlanError",
    "stores.store": "Store",
}

# All lore_mcp may use: import-linter's "lore_mcp sees only the stores facade" refuses the rest.
__all__ = ["ACTIVITY_KINDS", "IDENTIFIER", "LESSON_KINDS", "MAX_FINISH_ROUNDS", "MAX_LIST_LIMIT"]
__all__ += ["MAX_MESSAGE_CHARS", "MAX_RECALL_LIMIT", "MAX_SHORT_CHARS", "MAX_TAGS", "MAX_TAG_CHARS"]
__all__ += ["MAX_TEXT_CHARS", "ROOT_ONLY_KINDS", "ActivityBounds", "ActivityEntry", "ActivityNote"]
__all__ += ["ActivityQuery", "ApiKey", "CallCounts", "Commit", "ConflictError", "EmbeddingModel"]
__all__ += ["InvalidInputError", "KeyStore", "Lesson", "LessonDraft", "LessonPatch", "ModelChangedError"]
__all__ += ["ModelRecords", "NotFoundError", "NoticeFeed", "OAuthCode", "OAuthGrant", "OAuthTokenRow", "Org"]
__all__ += ["PlanError", "ProjectTx", "RankingParams", "RecallQuery", "Recalled", "SaveResult", "Scope"]
__all__ += ["ScoredLesson", "StaleLesson", "StalePlanError", "Store", "StoreError", "UnavailableError"]
__all__ += ["Unwritable", "history", "open_local_store", "open_postgres_store", "queries", "restates"]
__all__ += ["structured", "unwritable", "weight"]


def open_local_store(
    path: Path | str,
    *,
    ranking_params: RankingParams | None = None,
    activity_bounds: ActivityBounds | None = None,
) -> Store:
    """Open (creating and migrating as needed) the SQLite store at ``path``."""
    from stores.engine.lesson_rules import SqlStore
    from stores.sqlite.lessons import LocalLessons

    return SqlStore(LocalLessons(path, ranking_params=ranking_params, activity_bounds=activity_bounds))


def open_postgres_store(
    url: str,
    *,
    pool_size: int = 5,
    ranking_params: RankingParams | None = None,
    activity_bounds: ActivityBounds | None = None,
    read_url: str | None = None,
    direct_url: str | None = None,
) -> Store:
    """Connect to (and migrate) Postgres at ``url``, reading from ``read_url``'s replica if given."""
    from stores.engine.lesson_rules import SqlStore

    try:
        from stores.postgres.lessons import PostgresLessons
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise UnavailableError(
            f"The Postgres backend needs extra packages ({exc.name} is missing): "
            "pip install 'lore-memory-mcp[postgres]'."
        ) from exc
    backend = PostgresLessons(
        url,
        pool_size=pool_size,
        ranking_params=ranking_params,
        activity_bounds=activity_bounds,
        read_url=read_url,
        direct_url=direct_url,
    )
    return SqlStore(backend)


def __getattr__(name: str) -> Any:
    """A name of ``_LATER`` (or the modules ``history``, ``queries``, ``structured``), imported now."""
    if name in ("history", "queries", "structured"):
        value = importlib.import_module(f"stores.engine.{name}")
    else:
        module = next((module for module, names in _LATER.items() if name in names.split()), None)
        if module is None:
            raise AttributeError(f"module 'stores' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
