"""The store a backend opens: what ``stores.open_local_store`` and ``open_postgres_store`` return.

``LessonStore`` plus what lives beside lessons: the project transaction of structured memory and history,
orgs and API keys, and on a shared database per-key call counts. Imports are a ``save_many`` keeping ids."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from stores.engine.activity import ActivityNote, ActivityPage, ActivityQuery, RecallStats, StalePage
from stores.engine.keys import KeyStore
from stores.engine.lesson_rules import CallCounts, NoticeFeed
from stores.engine.lessons import LessonStore, Scope
from stores.engine.structured import ProjectTx


class Store(LessonStore, Protocol):
    """Lessons, tables, history and keys of one file or database."""

    def transaction(self, scope: Scope, *, write: bool) -> AbstractContextManager[ProjectTx]:
        """A project transaction: a write one takes its write lock, a read one sees a snapshot."""

    @property
    def keys(self) -> KeyStore:
        """Orgs and API keys in the same file or database (the same object on every access)."""

    @property
    def call_counts(self) -> CallCounts | None:
        """Shared call counts; None on SQLite (one process by design, counting in memory)."""

    def append_activity(self, scope: Scope, note: ActivityNote) -> str:
        """Log an entry of no change (a recall, a rolled-back failure); its id. It is held and
        written within 2 s (``ActivityRecords``), never waiting on the database, so a server may
        call it on its event loop; reads write held entries first. Changes log with their write."""

    def activity(self, scope: Scope, query: ActivityQuery) -> ActivityPage:
        """The project's activity log, newest first, as ``query`` filters it."""

    def recall_stats(self, scope: Scope, lesson_ids: list[str]) -> dict[str, RecallStats]:
        """For each lesson, how often and when last the kept log's recalls returned it."""

    def duplicate_pairs(self, scope: Scope, threshold: float) -> list[tuple[str, str, float]]:
        """Live pairs at ``threshold`` or more, most similar first, but pairs kept apart."""

    def keep_pair(self, scope: Scope, a: str, b: str) -> None:
        """Remember that the live lessons ``a`` and ``b`` stay two; idempotent."""

    def stale_lessons(self, scope: Scope, before: datetime, limit: int, cursor: str | None) -> StalePage:
        """Live lessons created before ``before`` that no recall in the kept log returned."""

    @property
    def notices(self) -> NoticeFeed | None:
        """Cross-process notices; None on SQLite, whose one server tells its own subscribers."""

    def probe_write(self) -> None:
        """Begin a real write and roll back, else ``UnavailableError``: ``/healthz`` and ``doctor``
        thus show a stuck writer or unwritable database, not only failing saves."""
