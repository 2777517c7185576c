"""What a tool call is given: the server's services, who is calling, and the argument types tools share.

Both come through the SDK's ``Context`` (kept out of the input schema): services from ``ctx.mcp_server``
(which also serves request-less calls, as completion's), the caller from the request's access token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, cast

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from lore_mcp.auth import Caller, Forbidden
from lore_mcp.key_tokens import caller_of
from lore_mcp.services.recording import Who
from stores import MAX_SHORT_CHARS, MAX_TEXT_CHARS

if TYPE_CHECKING:  # imported where made: the handshake is answered before the services load
    from lore_mcp.services.activity import ActivityService
    from lore_mcp.services.curation import CurationService
    from lore_mcp.services.keys import KeyService
    from lore_mcp.services.lessons import LessonService
    from lore_mcp.services.loop import LoopService, LoopSettings
    from lore_mcp.services.progress import Progress
    from lore_mcp.services.structured import StructuredService
    from lore_mcp.services.transfer import Transfer

# Argument types shared by the tools; their bounds are published, so clients see them first.
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Short = Annotated[str, Field(max_length=MAX_SHORT_CHARS)]
Tags = Annotated[
    list[Annotated[str, Field(max_length=64)]],
    Field(max_length=32, description="Short labels, e.g. ['stripe', 'webhooks']."),
]
Project = Annotated[
    str | None, Field(description="Project to use; defaults to the server's LORE_PROJECT.", max_length=64)
]
LessonId = Annotated[
    str, Field(description="A lesson id as returned by save_lesson or recall_lessons.", max_length=64)
]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
Days = Annotated[float, Field(gt=0, le=36_500)]  # a lesson's time to live
Cursor = Annotated[str | None, Field(max_length=64, description="next_cursor of the previous page.")]


class OrderBy(BaseModel):
    column: Annotated[str, Field(max_length=64)]
    direction: Literal["asc", "desc"] = "asc"


@dataclass(frozen=True)
class Services:
    """What answers every tool: built once by the composition root (``lore_mcp.app``)."""

    lessons: LessonService
    transfer: Transfer
    tables: StructuredService
    keys: KeyService | None = None  # the key tools' service; None serves no key tools
    loop_settings: LoopSettings | None = None  # what the loop tools give and ask; None: the defaults

    # Made on each use: these hold no state (the store and its activity log hold it).
    @property
    def activity(self) -> ActivityService:
        from lore_mcp.services.activity import ActivityService

        return ActivityService(self.lessons)

    @property
    def curation(self) -> CurationService:
        from lore_mcp.services.curation import CurationService

        return CurationService(self.lessons)

    @property
    def loop(self) -> LoopService:
        from lore_mcp.services.loop import LoopService, LoopSettings

        return LoopService(self.lessons, self.loop_settings or LoopSettings())

    @classmethod
    def over(cls, lessons: LessonService, keys: KeyService | None = None) -> Services:
        """The services sharing ``lessons`` (its store, embedder, org and default project)."""
        from lore_mcp.services.structured import StructuredService
        from lore_mcp.services.transfer import Transfer

        return cls(lessons, Transfer(lessons), StructuredService(lessons), keys)


class Serving(Protocol):
    """What a server gives its tools (``lore_mcp.transport.server.LoreServer`` is one)."""

    @property
    def services(self) -> Services | None:  # None: the server forwards calls and never runs a tool
        ...

    local_caller: Caller | None  # the trusted caller without API keys (stdio), or None


def caller() -> Caller | None:
    """The request's API key; None without keys (stdio, --dev-no-auth): the server's own org."""
    return caller_of(get_access_token())


def progress_of(ctx: Context[Any, Any], unit: str) -> Progress:
    """A long call's ``report``: MCP progress on the request's token, if it carries one."""

    async def report(done: int, total: int) -> None:
        await ctx.report_progress(done, total, f"{done} of {total} {unit}")

    return report


def client_name(ctx: Context[Any, Any]) -> str | None:
    """The ``clientInfo`` name (handshake's, or the request's on 2026-07-28), or None."""
    try:
        params = ctx.session.client_params
    except (ValueError, AttributeError, LookupError):  # no request: a call made without one
        return None
    name = getattr(getattr(params, "client_info", None), "name", None)
    return name if isinstance(name, str) else None


@dataclass(frozen=True)
class Call:
    """One tool call's services and who makes it (its key, and the name its client gave)."""

    services: Services
    who: Who
    local_caller: Caller | None

    def root(self, what: str) -> Caller:
        """A key tool's caller, which must be root to do ``what`` (stdio: the local user)."""
        found = self.who.caller or self.local_caller
        if found is None:
            raise Forbidden("Key tools need a root API key.")
        if not found.root:
            raise Forbidden(f"Only a root key can {what}; this key is not one.")
        return found

    @property
    def keys(self) -> KeyService:
        if self.services.keys is None:  # pragma: no cover - key tools are listed only with it
            raise Forbidden("This server does not manage keys.")
        return self.services.keys


def call_of(ctx: Context[Any, Any]) -> Call:
    """The services and caller of the call ``ctx`` belongs to."""
    server = cast(Serving, ctx.mcp_server)
    if server.services is None:
        raise RuntimeError("This server forwards tool calls; nothing runs locally.")
    return Call(server.services, Who(caller(), client_name(ctx)), server.local_caller)
