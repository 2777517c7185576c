"""Lore's resources and their URIs, named here once for the server, remote mode and the
subscriptions of ``lore_mcp.transport.protocol_extras``."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from lore_mcp.errors import InvalidArgument, LoreError, describe
from lore_mcp.tools.context import Services, caller
from stores.engine.activity import ActivityQuery
from stores.errors import StoreError

LESSON_TEMPLATE = "lore://lessons/{id}"
SCHEMA_URI = "lore://schema"
STATS_URI = "lore://stats"
ACTIVITY_URI = "lore://activity"
OVERVIEW_TEMPLATE = "lore://overview/{project}"
# Entries ``lore://activity`` shows: the latest, as ``recent_activity`` pages them.
ACTIVITY_RESOURCE_ENTRIES = 50


def lesson_uri(lesson_id: str) -> str:
    """The URI of one lesson (``LESSON_TEMPLATE`` filled in)."""
    return LESSON_TEMPLATE.replace("{id}", lesson_id)


def add_lesson_resource(server: MCPServer, services: Services | None) -> None:
    """``lore://lessons/{id}``: one lesson as JSON, in the caller's default project, with how
    often recalls in the kept activity log returned it and when last (listed without
    ``services`` by a server that forwards every read)."""

    @server.resource(
        LESSON_TEMPLATE,
        name="lesson",
        description="One lesson as JSON, with its recall count and last recall (from the activity log).",
        mime_type="application/json",
    )
    async def lesson_resource(id: str) -> str:
        try:
            if services is None:
                raise ResourceNotFoundError("This server forwards every read.")
            lesson = await services.lessons.get(id, caller=caller())
            recalls = await services.activity.recalls(id, caller=caller())
        except (InvalidArgument, StoreError) as exc:
            raise ResourceNotFoundError(describe(exc)[1]) from None
        return json.dumps({**lesson.model_dump(mode="json"), **recalls.model_dump(mode="json")})


def add_memory_resources(server: MCPServer, services: Services) -> None:
    """``lore://schema``, ``lore://stats`` and ``lore://activity``: what the memory holds and
    what was done to it, without a tool call."""

    @server.resource(
        SCHEMA_URI,
        name="schema",
        description="This project's tables, columns, row counts and schema_hash (as the schema tool).",
        mime_type="application/json",
    )
    async def schema_resource() -> str:
        return json.dumps(await services.tables.schema(None, caller=caller()))

    @server.resource(
        STATS_URI,
        name="stats",
        description="How much memory there is in this project (lessons, tables, rows, commits) and the projects this key can reach.",
        mime_type="application/json",
    )
    async def stats_resource() -> str:
        return json.dumps(await services.tables.stats(None, caller=caller()))

    @server.resource(
        OVERVIEW_TEMPLATE,
        name="overview",
        description="A project's counts (as lore://stats), lessons saved per day, top tags, and the "
        "most and least voted lessons, in one read.",
        mime_type="application/json",
    )
    async def overview_resource(project: str) -> str:
        from lore_mcp.services.overview import overview

        try:
            return json.dumps(await overview(services.tables, project, caller()))
        except (InvalidArgument, StoreError, LoreError) as exc:
            raise ResourceNotFoundError(describe(exc)[1]) from None

    @server.resource(
        ACTIVITY_URI,
        name="activity",
        description="The latest entries of this project's activity log (as recent_activity), newest first.",
        mime_type="application/json",
    )
    async def activity_resource() -> str:
        page = await services.activity.recent(ActivityQuery(limit=ACTIVITY_RESOURCE_ENTRIES), caller=caller())
        return page.model_dump_json()
