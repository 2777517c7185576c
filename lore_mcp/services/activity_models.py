"""``recent_activity`` results as pydantic models, so clients get an output schema."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from stores import ACTIVITY_KINDS, ActivityEntry, StaleLesson

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
    bytes: int | None = Field(
        default=None, description="Bytes of text an injection or an ask gave the agent."
    )
    person: bool = Field(
        default=False,
        description="A person on Lore's page made the call (known from its credential, not a name); "
        "such a recall counts as no agent's recall.",
    )

    @classmethod
    def of(cls, entry: ActivityEntry) -> ActivityEntryOut:
        note = dataclasses.asdict(entry.note)  # its recalled lessons become dicts too
        return cls.model_validate({**note, "id": entry.id, "at": entry.at, "bytes": note["size"]})


class StaleLessonOut(BaseModel):
    """A lesson older than asked that no recall in the kept log returned."""

    id: str
    problem: str
    created_at: datetime
    upvotes: int
    downvotes: int

    @classmethod
    def of(cls, lesson: StaleLesson) -> StaleLessonOut:
        return cls.model_validate(lesson, from_attributes=True)


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
