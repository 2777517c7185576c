"""The activity log's contract: each memory call leaves one entry (kind, what it touched, a recall's
query and results, who), written with its effect; a failure leaves only its code. Services decide the
``ActivityNote``, stores write, read and bound it; agents only read. Note text is already redacted."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

# What a call did, as an entry names it (a lesson write: its commit's kind). The last three reached an
# agent unasked (``lore_mcp.services.loop``): injected lessons, an ask to save, a dry run's ask.
KINDS: tuple[str, ...] = (
    *("save", "update", "merge", "vote", "delete", "recall", "apply", "revert", "import", "key"),
    *("inject", "ask", "would_ask"),
)
# Root-only kinds, bounded apart so a project key's traffic never pushes out what it cannot see.
ROOT_ONLY_KINDS = ("key",)
# Query characters kept: 16,000 in every entry of a busy project would make the log tens of MB.
MAX_QUERY_CHARS = 500
MAX_IDS = 100  # how many lesson ids and tables one entry keeps (an import of 100 lessons names them all)


@dataclass(frozen=True)
class ActivityBounds:
    """The log's bounds, trimmed every ``trim_every`` appends: 5,000 busy entries come to under 3 MB."""

    max_age_days: float = 30.0
    max_entries: int = 5_000
    trim_every: int = 100


@dataclass(frozen=True)
class Recalled:
    """A lesson a recall returned: its id, its place in the answer (1 is first) and its score."""

    id: str
    rank: int
    score: float


@dataclass(frozen=True)
class ActivityNote:
    """What one call records; the store adds time, id and a lesson write's commit (it knows
    whether a save merged). ``error``: a failed call's stable code, its effect rolled back."""

    kind: str
    key_id: str | None = None
    client: str | None = None
    lesson_ids: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    commit_id: str | None = None
    query: str | None = None
    results: tuple[Recalled, ...] = ()
    error: str | None = None
    target: str | None = None  # what a key change changed: ``created:<key id>`` or ``revoked:<key id>``
    # The client's session id of an injection or ask, and the bytes that reached the agent.
    session: str | None = None
    size: int | None = None
    person: bool = False  # a person's credential (the page's OAuth client, the ui key): no agent's recall

    def failed(self, code: str) -> ActivityNote:
        """The note of this call having failed with ``code``: nothing it touched, only who and why."""
        kept = {name: getattr(self, name) for name in ("kind", "key_id", "client", "query", "person")}
        return ActivityNote(**kept, error=code)

    def with_commit(self, kind: str, commit_id: str, targets: tuple[str, ...]) -> ActivityNote:
        """The note with its commit's kind (a merging save is a ``merge``), id and targets."""
        lessons = tuple(t.removeprefix("lesson:") for t in targets if t.startswith("lesson:"))
        tables = tuple(t.removeprefix("table:") for t in targets if t.startswith("table:"))
        kind = kind if kind in KINDS else self.kind
        return replace(self, kind=kind, commit_id=commit_id, lesson_ids=lessons, tables=tables)


@dataclass(frozen=True)
class ActivityEntry:
    """One entry as stored: its id (a ULID, newest greatest), its time, and the note."""

    id: str
    at: datetime
    note: ActivityNote


@dataclass(frozen=True)
class ActivityQuery:
    """Which entries to read, newest first; ``cursor`` is the previous page's last id."""

    kinds: tuple[str, ...] = ()
    hidden_kinds: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    lesson_id: str | None = None
    key_id: str | None = None
    client: str | None = None
    limit: int = 20
    cursor: str | None = None
    agents_only: bool = False  # leave out what people did on the page (``ActivityNote.person``)


@dataclass(frozen=True)
class ActivityPage:
    """One page of entries, newest first; pass ``next_cursor`` back for the next page."""

    entries: tuple[ActivityEntry, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class RecallStats:
    """How often recalls in the kept log returned a lesson, and when last (None: never)."""

    count: int = 0
    last_at: datetime | None = None


@dataclass(frozen=True)
class StaleLesson:
    """A live lesson created before the asked-for time that no recall in the kept log returned."""

    id: str
    problem: str
    created_at: datetime
    upvotes: int = 0
    downvotes: int = 0


@dataclass(frozen=True)
class StalePage:
    """Stale lessons oldest first; pass ``next_cursor`` back for the next page."""

    lessons: tuple[StaleLesson, ...]
    next_cursor: str | None = None
