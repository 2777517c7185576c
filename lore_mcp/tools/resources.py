"""Lore's resources and their URIs, named once for the server, remote mode and subscriptions."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from lore_mcp.errors import InvalidArgument, LoreError, describe
from lore_mcp.services.recording import Who
from lore_mcp.tools.context import Services, Serving, caller
from stores import ActivityQuery, StoreError

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


def _json_resource(server: MCPServer, uri: str, name: str, description: str) -> Callable[[Any], Any]:
    return server.resource(uri, name=name, description=description, mime_type="application/json")


@contextlib.contextmanager
def _not_found(*refusals: type[Exception]) -> Iterator[None]:
    """A read refused for what it named (a bad id, a project out of reach) is a resource not found."""
    try:
        yield
    except refusals as exc:
        raise ResourceNotFoundError(describe(exc)[1]) from None


def _ready(server: MCPServer) -> Services:
    services = cast(Serving, server).services  # made on first use
    assert services is not None  # memory resources are added only where tools run
    return services


def add_lesson_resource(server: MCPServer) -> None:
    """``lore://lessons/{id}``: one lesson as JSON, in the caller's default project, with how
    often recalls in the kept activity log returned it and when last (listed without
    ``services`` by a server that forwards every read)."""
    description = "One lesson as JSON, with its recall count and last recall (from the activity log)."

    @_json_resource(server, LESSON_TEMPLATE, "lesson", description)
    async def lesson_resource(id: str) -> str:
        services = cast(Serving, server).services
        if services is None:
            raise ResourceNotFoundError("This server forwards every read.")
        with _not_found(InvalidArgument, StoreError):
            lesson = await services.lessons.get(id, who=Who(caller()))
            recalls = await services.activity.recalls(id, who=Who(caller()))
        return json.dumps({**lesson.model_dump(mode="json"), **recalls.model_dump(mode="json")})


def add_memory_resources(server: MCPServer) -> None:
    """``lore://schema``, ``lore://stats``, ``lore://overview/{project}`` and ``lore://activity``:
    what the memory holds and what was done to it, without a tool call."""
    described = "This project's tables, columns, row counts and schema_hash (as the schema tool)."

    @_json_resource(server, SCHEMA_URI, "schema", described)
    async def schema_resource() -> str:
        return json.dumps(await _ready(server).tables.schema(None, who=Who(caller())))

    counted = "How much memory there is in this project (lessons, tables, rows, commits) and the projects this key can reach."

    @_json_resource(server, STATS_URI, "stats", counted)
    async def stats_resource() -> str:
        return json.dumps(await _ready(server).tables.stats(None, who=Who(caller())))

    summed = (
        "A project's counts (as lore://stats), lessons saved per day, top tags, and the most and least "
        "voted lessons, in one read."
    )

    @_json_resource(server, OVERVIEW_TEMPLATE, "overview", summed)
    async def overview_resource(project: str) -> str:
        with _not_found(StoreError, LoreError):
            return json.dumps(await _ready(server).tables.overview(project, who=Who(caller())))

    logged = "The latest entries of this project's activity log (as recent_activity), newest first."

    @_json_resource(server, ACTIVITY_URI, "activity", logged)
    async def activity_resource() -> str:
        page = await _ready(server).activity.recent(
            ActivityQuery(limit=ACTIVITY_RESOURCE_ENTRIES), who=Who(caller())
        )
        return page.model_dump_json()
