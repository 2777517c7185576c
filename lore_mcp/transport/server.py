"""Lore's tools on the SDK's ``MCPServer``; ``call_tool`` makes every failure ``CODE: sentence``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

from lore_mcp import __version__
from lore_mcp.auth import Caller
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.errors import UNAVAILABLE, InvalidArgument, LoreError, describe, wire_text
from lore_mcp.key_tokens import caller_of
from lore_mcp.settings import DEFAULT_REQUEST_TIMEOUT_S
from lore_mcp.tools import LoreTools
from lore_mcp.tools.argument_checks import check_arguments
from lore_mcp.tools.context import Services
from lore_mcp.tools.prompts import add_prompts
from lore_mcp.tools.registry import ADMIN_TOOLS, BUSY_ADVICE, HEAVY_TOOLS, INSTRUCTIONS, SPECS
from lore_mcp.tools.resources import add_lesson_resource, add_memory_resources
from lore_mcp.transport.admission import Busy, HeavyGate
from lore_mcp.transport.notices import NoticeBus, ScopedListen
from lore_mcp.transport.protocol_extras import add_protocol_extras
from lore_mcp.transport.stdio import stdio_transport
from stores import StoreError, UnavailableError, deadline

logger = logging.getLogger("lore_mcp")

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# What server directories and client lists show (serverInfo); the website: the page every install shares.
TITLE = "Lore"
DESCRIPTION = "Memory for AI agents: lessons recalled by meaning, voted on, with versioned structured memory."
WEBSITE_URL = "https://pypi.org/project/lore-memory-mcp/"
# Said of a call stopped at its deadline, before its registry entry's advice (what it can do about it).
DEADLINE = "The request took longer than this server allows and was stopped; it changed nothing. "


class LoreServer(MCPServer):
    """Tool errors carry a stable code, never internal detail. Tools reach ``services`` and the caller
    (the request's key, else ``local_caller``) via ``tools.context``; key tools are listed to root only."""

    def __init__(
        self,
        services: Services | Callable[[], Services] | None,
        *,
        tools: Collection[str],
        local_caller: Caller | None = None,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        heavy_gate: HeavyGate | None = None,
        log_level: LogLevel = "WARNING",
        **settings: Any,
    ) -> None:
        super().__init__(
            name="lore",
            title=TITLE,
            description=DESCRIPTION,
            website_url=WEBSITE_URL,
            version=__version__,
            instructions=INSTRUCTIONS,
            log_level=log_level,
            **settings,
        )
        # What answers the tools, or what makes them on first use; None: it forwards every call (remote mode).
        self._services = services
        # The trusted caller of a server without API keys (stdio): a root of its own org.
        self.local_caller = local_caller
        # Seconds a tool call may take (LORE_REQUEST_TIMEOUT_S); None: no limit.
        self.request_timeout_s = request_timeout_s
        # Slots for the tools that can take long, shared fairly by orgs and keys; None: no cap.
        self.heavy_gate = heavy_gate
        # The subscriptions/listen handler, whose close() shutdown calls before it drains.
        self.listen_streams: ScopedListen | None = None
        # The tools of the ``tools`` groups (the SDK's manager, each tool made on first use).
        self._tool_manager = LoreTools(tools)

    @property
    def services(self) -> Services | None:
        found = self._services
        return found() if callable(found) else found

    def ready(self) -> None:
        """Wait for services still being made (a stdio server opens its store after the handshake):
        a tool's module imports numpy, which two threads must not import at once."""
        _ = self.services

    async def list_tools(self) -> list[Any]:
        self.ready()
        caller = self.caller()
        root = caller is not None and caller.root
        return [
            t.model_copy(update={k: lean_schema(getattr(t, k)) for k in ("input_schema", "output_schema")})
            for t in await super().list_tools()
            if root or t.name not in ADMIN_TOOLS
        ]

    def caller(self) -> Caller | None:
        """Who makes the current request: its API key, or the trusted local user (stdio)."""
        return caller_of(get_access_token()) or self.local_caller

    def check_call(self, name: str, arguments: dict[str, Any]) -> None:
        """Refuse unknown arguments and non-finite numbers: the SDK would drop one and misname the other."""
        schema = self._tool_input_schema(name)  # the tool's input schema as listed
        if schema is not None:
            try:
                check_arguments(name, schema, arguments)
            except InvalidArgument as exc:
                raise ToolError(wire_text(exc.code, exc.message)) from None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Run under the request deadline, which travels to store work on threads (``stores.deadline``):
        cancelling this coroutine would not stop a thread, and could answer before the work finished."""
        self.ready()
        self.check_call(name, arguments)
        with deadline.limit(self.request_timeout_s):
            try:
                async with self._admitted(name, self.caller()):
                    return await super().call_tool(name, arguments, context)
            except Busy as exc:
                raise ToolError(wire_text(exc.code, exc.message)) from None
            except ToolError as exc:
                code, message = _tool_failure(name, exc, late=deadline.expired())
                raise ToolError(wire_text(code, message)) from exc.__cause__

    def _admitted(self, name: str, caller: Caller | None) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot of ``heavy_gate`` for a heavy tool (raises ``Busy``); nothing for the rest."""
        if self.heavy_gate is None or name not in HEAVY_TOOLS:
            return contextlib.nullcontext()
        org, key = (caller.org, caller.key_id) if caller is not None else ("", "")
        return self.heavy_gate.slot(org, key)

    @property
    def lowlevel(self) -> Server[Any]:
        """The SDK's low-level server under this one, where request handlers are registered."""
        return self._lowlevel_server

    async def run_stdio_async(self) -> None:
        """Serve over stdio with Lore's transport, which answers malformed frames."""
        lowlevel = self.lowlevel
        async with stdio_transport() as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def _tool_failure(name: str, exc: ToolError, *, late: bool) -> tuple[str, str]:
    """Code and sentence for a failure; past the deadline, a stopped statement or outage is the deadline."""
    cause = exc.__cause__
    anticipated = isinstance(cause, LoreError | StoreError | ValidationError)
    if late and (isinstance(cause, UnavailableError) or not anticipated):
        logger.warning("tool %s stopped at its deadline", name)
        return UNAVAILABLE, DEADLINE + (SPECS[name].advice if name in SPECS else BUSY_ADVICE)
    if anticipated:
        return describe(cause)  # type: ignore[arg-type]
    if cause is None and not isinstance(exc, UnexpectedToolError):
        return "NOT_FOUND", f"There is no tool named {name!r}; call tools/list to see them."
    return describe(cause or exc)


def lean_schema(schema: Any) -> Any:
    """The schema without pydantic's ``title`` strings (a fifth of a listing agents pay for every turn).
    Nullable fields keep ``anyOf``: single-``type`` dialects (Gemini's) refuse ``type: [T, null]``."""
    if isinstance(schema, list):
        return [lean_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: lean_schema(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}


def load_model_after_first_request(embedder: Embedder) -> Callable[[Any, Any], Awaitable[Any]]:
    """Load the embedding model after the first answer: during the handshake it competes for the GIL."""

    async def middleware(ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if not embedder.started:
                embedder.start()

    return middleware


def lore_server(
    services: Services | Callable[[], Services] | None,
    groups: Collection[str],
    *,
    embedder: Embedder | None = None,
    keys: bool = False,
    server_class: type[LoreServer] = LoreServer,
    bus: NoticeBus | None = None,
    **settings: Any,
) -> LoreServer:
    """A server with ``groups``' tools (key tools only with ``keys``, a key service), resources, prompts
    and extras; ``bus`` carries change notices, ``embedder`` loads after the first answer. ``services``
    may be made on first use; without them the server forwards every call (remote mode)."""
    served = set(groups) if keys else set(groups) - {"admin"}
    middleware = [load_model_after_first_request(embedder)] if embedder is not None else []
    server = server_class(services, tools=served, middleware=middleware, **settings)
    if services is not None:
        add_prompts(server)
        add_memory_resources(server)
    add_lesson_resource(server)
    server.listen_streams = add_protocol_extras(server, server.lowlevel, services is not None, bus)
    return server
