"""Lore's resources and their URIs, named here once for the server, remote mode and the
subscriptions of ``lore_mcp.transport.protocol_extras``."""

from __future__ import annotations

import json
from typing import Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from lore_mcp.auth import Caller, current_caller
from lore_mcp.errors import InvalidArgument, describe
from lore_mcp.services.models import LessonOut
from stores.errors import StoreError

LESSON_TEMPLATE = "lore://lessons/{id}"
SCHEMA_URI = "lore://schema"
STATS_URI = "lore://stats"


def lesson_uri(lesson_id: str) -> str:
    """The URI of one lesson (``LESSON_TEMPLATE`` filled in)."""
    return LESSON_TEMPLATE.replace("{id}", lesson_id)


class LessonReader(Protocol):
    async def get(
        self, lesson_id: str, project: str | None = None, *, caller: Caller | None = None
    ) -> LessonOut: ...


class MemoryDescriber(Protocol):
    async def schema(self, project: str | None = None, *, caller: Caller | None = None) -> dict[str, Any]: ...

    async def stats(self, project: str | None = None, *, caller: Caller | None = None) -> dict[str, Any]: ...


def add_lesson_resource(server: MCPServer, lessons: LessonReader) -> None:
    """``lore://lessons/{id}``: one lesson as JSON, in the caller's default project."""

    @server.resource(
        LESSON_TEMPLATE, name="lesson", description="One lesson as JSON.", mime_type="application/json"
    )
    async def lesson_resource(id: str) -> str:
        try:
            lesson = await lessons.get(id, caller=current_caller.get())
        except (InvalidArgument, StoreError) as exc:
            raise ResourceNotFoundError(describe(exc)[1]) from None
        return lesson.model_dump_json()


def add_memory_resources(server: MCPServer, tables: MemoryDescriber) -> None:
    """``lore://schema`` and ``lore://stats``: what the memory holds, without a tool call."""

    @server.resource(
        SCHEMA_URI,
        name="schema",
        description="This project's tables, columns, row counts and schema_hash (as the schema tool).",
        mime_type="application/json",
    )
    async def schema_resource() -> str:
        return json.dumps(await tables.schema(None, caller=current_caller.get()))

    @server.resource(
        STATS_URI,
        name="stats",
        description="How much memory there is: lessons, projects, tables, commits.",
        mime_type="application/json",
    )
    async def stats_resource() -> str:
        return json.dumps(await tables.stats(None, caller=current_caller.get()))
