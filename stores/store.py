"""The store a backend opens: what ``stores.open_local_store`` and ``open_postgres_store`` return.

``Store`` is ``stores.engine.lessons.LessonStore`` with what lives beside the lessons in the same
file or database: the project transaction that structured memory and history run in
(``stores.engine.structured``), orgs and API keys (``stores.engine.keys``), and imports, which land in
one transaction with one commit. Consumers type the store as ``Store``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from stores.engine.keys import KeyStore
from stores.engine.lessons import LessonStore, Scope
from stores.engine.structured import ProjectTx


class Store(LessonStore, Protocol):
    """Lessons, tables, history, keys and imports of one file or database."""

    def transaction(self, scope: Scope, *, write: bool) -> AbstractContextManager[ProjectTx]:
        """One transaction on one project, for ``stores.engine.structured``: a write one takes the
        project's write lock (and restores lessons for a revert), a read one sees a snapshot."""
        ...

    @property
    def keys(self) -> KeyStore:
        """Orgs and API keys in the same file or database (the same object on every access)."""
        ...

    def import_lessons(self, scope: Scope, images: Sequence[Mapping[str, Any]]) -> tuple[int, int, int]:
        """Store lesson images (``stores.engine.lessons.lesson_image``, each with its vector) whose ids
        are new to the project, in one transaction with one ``import`` commit, merging one that
        adds nothing to a stored lesson (``stores.engine.dedup``); (added, skipped, merged)."""
        ...

    def probe_write(self) -> None:
        """Begin a real write and roll it back, raising ``UnavailableError`` when it cannot: what
        ``/healthz`` and ``doctor`` check, so a writer that is stuck or a database that cannot
        be written shows up there, not only as failing saves."""
        ...
