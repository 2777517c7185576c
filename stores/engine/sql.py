"""The one SQL layer the engine writes against: statements as text with ``:name`` parameters, not
SQLAlchemy Core (its import costs about 0.37 s, over a third of the local cold start, for a builder
nothing needs). Each ``SqlTx`` keeps what differs: JSON and times, list membership, deadlines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol


class SqlTx(Protocol):
    """One open transaction: run a statement, get its rows as column-name mappings."""

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run ``sql`` with ``params`` bound by name; every row it returns (none for most writes)."""

    def many(self, sql: str, params: Sequence[Mapping[str, Any]]) -> None:
        """Run a write once for each set of parameters (nothing when there is none)."""

    def together(self, writes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """``INSERT``s in one round trip: a commit, targets and entry cost Postgres one, not three."""

    def json(self, param: str) -> str:
        """The SQL that binds parameter ``param`` (a ``dump``) as the database's JSON value."""

    def dump(self, value: Any) -> Any:
        """A JSON value as bound for ``json``."""

    def load(self, value: Any) -> Any:
        """A stored JSON column back as Python values."""

    def stamp(self, when: datetime) -> Any:
        """``when`` as the database stores a time."""

    def time(self, value: Any) -> datetime:
        """A stored time back as an aware ``datetime``."""

    def in_list(self, column: str, param: str) -> str:
        """SQL true when ``column`` is one of the values bound as ``param`` (a ``listed``)."""

    def listed(self, values: Sequence[Any]) -> Any:
        """A list of values as bound for ``in_list``."""

    def each(self, param: str) -> str:
        """A ``FROM`` item of the texts bound as ``param`` (a ``listed``), one row each, as ``value``."""
