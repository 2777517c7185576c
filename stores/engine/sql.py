"""The one SQL layer the engine writes against: statements as text with ``:name`` parameters.

Both dialects take the same text: SQLite binds ``:name`` itself, and Postgres runs it
through SQLAlchemy's ``text()``. Why not SQLAlchemy Core on both: importing it costs about
0.37 s, more than a third of the local server's whole cold start (spawn to first save), and
the engine's statements need nothing a query builder gives. What truly differs (how a
transaction is opened and locked, how a time is stored) stays in each dialect's adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class SqlTx(Protocol):
    """One open transaction: run a statement, get its rows as column-name mappings."""

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run ``sql`` with ``params`` bound by name; every row it returns (none for most writes)."""
        ...
