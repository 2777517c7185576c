"""Reading the activity log (``recording`` writes it): recent activity and a lesson's recalls, and
the models they return, so clients get an output schema."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

import anyio.to_thread
from pydantic import BaseModel, Field

from lore_mcp.errors import InvalidArgument
from lore_mcp.services.lesson_input import ULID_PATTERN, check_id
from lore_mcp.services.lessons import OnLessons
from lore_mcp.services.models import Stored
from lore_mcp.services.recording import NO_KEY, Who
from lore_mcp.services.structured import in_transaction
from stores import ACTIVITY_KINDS, MAX_LIST_LIMIT, ROOT_ONLY_KINDS, ActivityEntry, ActivityQuery, Scope

# The stores' kinds, declared once there (a string for mypy, which takes no computed Literal).
if TYPE_CHECKING:
    ActivityKind = str
else:
    ActivityKind = Literal[ACTIVITY_KINDS]


class RecalledOut(BaseModel):
    """A lesson a recall returned."""

    id: str
    rank: int = Field(description="Its place in the answer, 1 first.")
    score: float


class ActivityEntryOut(BaseModel):
    """One tool call as the log keeps it."""

    id: str = Field(description="The entry's id (a ULID: newer entries have greater ids).")
    at: datetime
    kind: ActivityKind = Field(description="What the call did; a save that merged is `merge`.")
    key_id: str | None = Field(description="The id of the API key that called; null over stdio.")
    client: str | None = Field(description="The client's name as it introduced itself, if it did.")
    lesson_ids: list[str] = Field(description="Lessons the call changed (a recall's are in `results`).")
    tables: list[str] = Field(description="Tables the call changed.")
    commit_id: str | None = Field(description="The commit it recorded (see history); null if none.")
    query: str | None = Field(description="A recall's query, redacted and cut to 500 characters.")
    results: list[RecalledOut] = Field(description="What a recall returned, best first.")
    error: str | None = Field(description="The error code of a call that failed and changed nothing.")
    target: str | None = Field(
        default=None, description="What a key change changed: `created:<key id>` or `revoked:<key id>`."
    )
    session: str | None = Field(
        default=None, description="The agent session an injection or an ask to save belongs to."
    )
    bytes: int | None = Field(None, description="Bytes of text an injection or an ask gave the agent.")
    person: bool = Field(
        default=False,
        description="A person on Lore's page made the call (known from its credential, not a name); "
        "such a recall counts as no agent's recall.",
    )

    @classmethod
    def of(cls, entry: ActivityEntry) -> ActivityEntryOut:
        note = dataclasses.asdict(entry.note)  # its recalled lessons become dicts too
        return cls.model_validate({**note, "id": entry.id, "at": entry.at, "bytes": note["size"]})


class StaleLessonOut(Stored):
    """A lesson older than asked that no recall in the kept log returned."""

    id: str
    problem: str
    created_at: datetime
    upvotes: int
    downvotes: int


class ActivityResult(BaseModel):
    project: str = Field(description="The project whose log this is.")
    entries: list[ActivityEntryOut] = Field(default_factory=list, description="Newest first.")
    stale_lessons: list[StaleLessonOut] = Field(
        default_factory=list,
        description="With stale_days: lessons older than that never recalled, oldest first.",
    )
    titles: dict[str, str] = Field(
        default_factory=dict, description="The problem of each stored lesson the entries name, by id."
    )
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class LessonRecalls(BaseModel):
    """How often recalls in the kept log returned a lesson, and when last."""

    recalls: int
    last_recalled_at: datetime | None


class ActivityService(OnLessons):
    """``recent_activity``, ``lore://activity`` and a lesson's recall count."""

    async def recent(
        self,
        asked: ActivityQuery,
        *,
        stale_days: float | None = None,
        project: str | None = None,
        who: Who = NO_KEY,
    ) -> ActivityResult:
        """The entries ``asked`` names (``hidden_kinds`` is the caller's), or stale lessons."""
        scope = self.lessons.scope(project, who.caller)
        if not 1 <= asked.limit <= MAX_LIST_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_LIST_LIMIT}.")
        if asked.cursor is not None and not ULID_PATTERN.fullmatch(asked.cursor):
            raise InvalidArgument("cursor must be the next_cursor of a previous page.")
        if stale_days is not None:
            return await self._stale(scope, stale_days, asked.limit, asked.cursor)
        unknown = sorted(set(asked.kinds) - set(ACTIVITY_KINDS))
        if unknown:
            raise InvalidArgument(
                f"kind must be among {', '.join(ACTIVITY_KINDS)}; not {', '.join(unknown)}."
            )
        query = replace(
            asked,
            # Key changes are the org's business: root keys (and the local user) see them.
            hidden_kinds=ROOT_ONLY_KINDS if who.caller is not None and not who.caller.root else (),
            since=in_utc(asked.since),
            until=in_utc(asked.until),
            lesson_id=check_id(asked.lesson_id) if asked.lesson_id is not None else None,
        )
        page = await anyio.to_thread.run_sync(self.store.activity, scope, query)
        entries = [ActivityEntryOut.of(e) for e in page.entries]
        named = sorted({i for e in entries for i in [*e.lesson_ids, *(r.id for r in e.results)]})
        # People read lessons by their problem, not their id: one query for a page's worth.
        titles = await in_transaction(self.store, scope, lambda tx: tx.lesson_titles(named)) if named else {}
        return ActivityResult(
            project=scope.project, entries=entries, titles=titles, next_cursor=page.next_cursor
        )

    async def _stale(self, scope: Scope, days: float, limit: int, cursor: str | None) -> ActivityResult:
        if not 0 <= days <= 36_500:
            raise InvalidArgument("stale_days must be between 0 and 36500.")
        before = datetime.now(UTC) - timedelta(days=days)
        page = await anyio.to_thread.run_sync(self.store.stale_lessons, scope, before, limit, cursor)
        return ActivityResult(
            project=scope.project,
            stale_lessons=[StaleLessonOut.of(s) for s in page.lessons],
            next_cursor=page.next_cursor,
        )

    async def recalls(
        self, lesson_id: str, project: str | None = None, *, who: Who = NO_KEY
    ) -> LessonRecalls:
        """How often and when last the kept log's recalls returned the lesson."""
        scope = self.lessons.scope(project, who.caller)
        lesson_id = check_id(lesson_id)
        found = (await anyio.to_thread.run_sync(self.store.recall_stats, scope, [lesson_id]))[lesson_id]
        return LessonRecalls(recalls=found.count, last_recalled_at=found.last_at)


def in_utc(when: datetime | None) -> datetime | None:
    """A time bound in UTC; one without a zone is taken as UTC."""
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
