"""The store a backend opens: what ``stores.open_local_store`` and ``open_postgres_store`` return.

``Store`` is ``stores.engine.lessons.LessonStore`` with what lives beside the lessons in the same
file or database: the project transaction that structured memory and history run in
(``stores.engine.structured``), orgs and API keys (``stores.engine.keys``), and, on a database
that several server processes share, the tool calls each key made (``CallCounts``). Imports are
a ``save_many`` that keeps ids. Consumers type the store as ``Store``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from stores.engine.activity import ActivityNote, ActivityPage, ActivityQuery, RecallStats, StalePage
from stores.engine.keys import KeyStore
from stores.engine.lessons import LessonStore, Scope
from stores.engine.structured import ProjectTx


class CallCounts(Protocol):
    """Tool calls per API key, counted in the database so that every server process on it
    shares one count (the team server's rate limit; ``stores.postgres.call_counts``); the
    same counts hold failed authentications per client address, under keys that cannot be a
    key id (``lore_mcp.transport.auth_guard.FAILED_AUTH_PREFIX``)."""

    def take(self, key_id: str, calls: int, limit: int, window_s: int) -> float | None:
        """Count ``calls`` more for ``key_id`` if its window of ``window_s`` seconds leaves room
        for them under ``limit``: None when they were counted, else the seconds until the
        window ends (and nothing is counted)."""
        ...


class NoticeFeed(Protocol):
    """Change notices shared by every server process on one database (``stores.postgres.notices``).
    A notice is a small JSON object; what it says is the caller's business."""

    def publish(self, notice: Mapping[str, Any]) -> None:
        """Send ``notice`` to every subscriber of every process on the database, this one included."""
        ...

    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``listener`` with each notice from now on, on a thread of the feed's own; returns
        the callable that stops it."""
        ...

    def wait_listening(self, timeout: float) -> bool:
        """Whether notices published from now on reach this process's subscribers, waiting up to
        ``timeout`` seconds for the feed to listen (it starts on the first subscription)."""
        ...


class Store(LessonStore, Protocol):
    """Lessons, tables, history and keys of one file or database."""

    def transaction(self, scope: Scope, *, write: bool) -> AbstractContextManager[ProjectTx]:
        """One transaction on one project, for ``stores.engine.structured``: a write one takes the
        project's write lock (and restores lessons for a revert), a read one sees a snapshot."""
        ...

    @property
    def keys(self) -> KeyStore:
        """Orgs and API keys in the same file or database (the same object on every access)."""
        ...

    @property
    def call_counts(self) -> CallCounts | None:
        """The shared count of tool calls per key; None where the store serves one process by
        design (SQLite), whose server counts in memory."""
        ...

    def append_activity(self, scope: Scope, note: ActivityNote) -> str:
        """Add an entry that belongs to no change (a recall's, or a failed call's once its effect
        was rolled back) to the project's activity log; its id. Both backends hold such entries
        back and write them together within 2 s (SQLite also with its next write, ``ActivityRecords.riding``), so
        this call only holds the entry in memory and never waits on the database: a server may
        call it on its event loop. The log's reads write held entries first. The writes of lessons take their entry as ``activity`` and
        ``ProjectTx.append_activity`` adds one in the transaction of an apply or revert."""
        ...

    def activity(self, scope: Scope, query: ActivityQuery) -> ActivityPage:
        """The project's activity log, newest first, as ``query`` filters it."""
        ...

    def recall_stats(self, scope: Scope, lesson_ids: list[str]) -> dict[str, RecallStats]:
        """For each lesson, how often and when last the kept log's recalls returned it."""
        ...

    def duplicate_pairs(self, scope: Scope, threshold: float) -> list[tuple[str, str, float]]:
        """Pairs of live lessons with cosine similarity >= ``threshold``, most similar first, but
        pairs kept apart (``stores.engine.curation``)."""
        ...

    def keep_pair(self, scope: Scope, a: str, b: str) -> None:
        """Remember that the live lessons ``a`` and ``b`` stay two; idempotent."""
        ...

    def stale_lessons(self, scope: Scope, before: datetime, limit: int, cursor: str | None) -> StalePage:
        """Live lessons created before ``before`` that no recall in the kept log returned."""
        ...

    @property
    def notices(self) -> NoticeFeed | None:
        """Change notices between the server processes on this database; None where the store
        serves one process by design (SQLite), whose server tells its own subscribers."""
        ...

    def probe_write(self) -> None:
        """Begin a real write and roll it back, raising ``UnavailableError`` when it cannot: what
        ``/healthz`` and ``doctor`` check, so a writer that is stuck or a database that cannot
        be written shows up there, not only as failing saves."""
        ...
