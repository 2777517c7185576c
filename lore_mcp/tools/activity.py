"""recent_activity: the log Lore keeps of what agents did, which agents read and never write."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.services.activity_models import ActivityKind, ActivityResult
from lore_mcp.tools.arguments import Cursor, Project
from lore_mcp.tools.context import call_of
from stores.engine.lessons import MAX_LIST_LIMIT


async def recent_activity(
    ctx: Context,
    kinds: Annotated[
        list[ActivityKind], Field(max_length=10, description="Only entries of these kinds; all if empty.")
    ] = [],  # noqa: B006 - the SDK copies defaults per call
    since: Annotated[
        datetime | None, Field(description="Only entries at or after this time (ISO 8601).")
    ] = None,
    until: Annotated[datetime | None, Field(description="Only entries before this time (ISO 8601).")] = None,
    lesson_id: Annotated[
        str | None, Field(max_length=64, description="Only entries that changed or recalled this lesson.")
    ] = None,
    key_id: Annotated[
        str | None, Field(max_length=64, description="Only calls made with this API key (its id).")
    ] = None,
    client_name: Annotated[
        str | None, Field(max_length=100, description="Only calls from the client of this name.")
    ] = None,
    agents_only: Annotated[
        bool,
        Field(description="Leave out what people did on Lore's page (told apart by their credential)."),
    ] = False,
    stale_days: Annotated[
        float | None,
        Field(
            ge=0,
            le=36_500,
            description="Instead of entries, list lessons created over this many days ago that no "
            "recall in the kept log returned (candidates to improve or delete), oldest first.",
        ),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 20,
    cursor: Cursor = None,
    project: Project = None,
) -> ActivityResult:
    """What was done to this project's memory, newest first: every save, update, merge, vote,
    delete, recall (its query and the lessons it returned), apply, revert and import, with the
    caller's key id and client; a failed call shows only its error code. Kept for a limited
    time and count."""
    call = call_of(ctx)
    return await call.services.activity.recent(
        kinds=list(kinds),
        since=since,
        until=until,
        lesson_id=lesson_id,
        key_id=key_id,
        client_name=client_name,
        agents_only=agents_only,
        stale_days=stale_days,
        limit=limit,
        cursor=cursor,
        project=project,
        caller=call.caller,
    )
