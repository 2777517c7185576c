"""recent_activity: the log Lore keeps of what agents did, which agents read and never write."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.services.activity import ActivityKind, ActivityResult
from lore_mcp.tools.context import Cursor, Project, call_of
from stores import MAX_LIST_LIMIT, ActivityQuery

# The arguments' schema, declared apart so the tool's signature reads in one screen.
Kinds = Annotated[
    list[ActivityKind], Field(max_length=10, description="Only entries of these kinds; all if empty.")
]
Since = Annotated[datetime | None, Field(description="Only entries at or after this time (ISO 8601).")]
Until = Annotated[datetime | None, Field(description="Only entries before this time (ISO 8601).")]
LessonFilter = Annotated[
    str | None, Field(max_length=64, description="Only entries that changed or recalled this lesson.")
]
KeyFilter = Annotated[
    str | None, Field(max_length=64, description="Only calls made with this API key (its id).")
]
ClientFilter = Annotated[
    str | None, Field(max_length=100, description="Only calls from the client of this name.")
]
AgentsOnly = Annotated[
    bool, Field(description="Leave out what people did on Lore's page (told apart by their credential).")
]
STALE = (
    "Instead of entries, list lessons created over this many days ago that no "
    "recall in the kept log returned (candidates to improve or delete), oldest first."
)
StaleDays = Annotated[float | None, Field(ge=0, le=36_500, description=STALE)]


async def recent_activity(
    ctx: Context,
    kinds: Kinds = [],  # noqa: B006 - the SDK copies defaults per call
    since: Since = None,
    until: Until = None,
    lesson_id: LessonFilter = None,
    key_id: KeyFilter = None,
    client_name: ClientFilter = None,
    agents_only: AgentsOnly = False,
    stale_days: StaleDays = None,
    limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 20,
    cursor: Cursor = None,
    project: Project = None,
) -> ActivityResult:
    """What was done to this project's memory, newest first: every save, update, merge, vote,
    delete, recall (its query and the lessons it returned), apply, revert and import, with the
    caller's key id and client; a failed call shows only its error code. Kept for a limited
    time and count."""
    call = call_of(ctx)
    asked = ActivityQuery(
        kinds=tuple(kinds),
        since=since,
        until=until,
        lesson_id=lesson_id,
        key_id=key_id,
        client=client_name,
        agents_only=agents_only,
        limit=limit,
        cursor=cursor,
    )
    return await call.services.activity.recent(asked, stale_days=stale_days, project=project, who=call.who)
