"""The MCP server: Lore's tools and resources on the ``mcp`` SDK's ``MCPServer``.

Tools are thin: each validates its typed arguments (the SDK publishes them as the
input schema), calls ``LessonService`` and returns a pydantic model (the output
schema). ``LoreServer.call_tool`` is the single choke point where every failure
becomes ``CODE: sentence`` (see ``lore_mcp.errors``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from lore_mcp import __version__
from lore_mcp.auth import Caller, Forbidden, caller_of, current_caller
from lore_mcp.embedding import Embedder
from lore_mcp.errors import UNAVAILABLE, InvalidArgument, LoreError, describe, wire_text
from lore_mcp.keys_service import CreatedKey, KeyList, KeyOut, KeyTools
from lore_mcp.lessons_service import LessonService
from lore_mcp.models import (
    DeleteResult,
    LessonOut,
    ListResult,
    RecallResult,
    SaveLessonResult,
    UpdateLessonResult,
    VoteResult,
)
from lore_mcp.plan_models import PlanModel, RowFilter
from lore_mcp.settings import DEFAULT_REQUEST_TIMEOUT_S
from lore_mcp.stdio import stdio_transport
from lore_mcp.structured_service import StructuredService
from lore_mcp.transfer import MAX_IMPORT_BATCH, ExportPage, ImportResult, LessonIn, Transfer
from stores import deadline
from stores.errors import StoreError, UnavailableError
from stores.lessons import MAX_LIST_LIMIT, MAX_RECALL_LIMIT, MAX_SHORT_CHARS, MAX_TEXT_CHARS

logger = logging.getLogger("lore_mcp")

# Listed only to root API keys (see LoreServer.list_tools).
ADMIN_TOOLS = frozenset({"create_key", "list_keys", "revoke_key"})

# LORE_TOOLS picks groups, since every listed tool costs an agent context.
TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "lessons": (
        "save_lesson",
        "recall_lessons",
        "upvote_lesson",
        "downvote_lesson",
        "get_lesson",
        "update_lesson",
        "delete_lesson",
        "list_lessons",
        "export_lessons",
        "import_lessons",
    ),
    "structured": ("schema", "plan", "apply", "query_rows"),
    "history": ("history", "get_commit", "revert_commit"),
    "admin": tuple(sorted(ADMIN_TOOLS)),
}
DEFAULT_TOOL_GROUPS = ("lessons", "structured", "history")

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

INSTRUCTIONS = (
    "Lore is your long-term memory of lessons: a problem and how it was resolved. "
    "Call recall_lessons before starting work that may have been done before; "
    "call save_lesson after solving something non-obvious; upvote_lesson when a recalled lesson helped, "
    "downvote_lesson when it was wrong or stale. For structured memory, read schema, dry-run a plan, "
    "then apply it; every change is a commit you can list (history) and undo (revert_commit). "
    "Errors start with a stable code such as VALIDATION_ERROR."
)

# Bounds here become the published input schema, so clients see them before calling.
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Short = Annotated[str, Field(max_length=MAX_SHORT_CHARS)]
Tags = Annotated[
    list[Annotated[str, Field(max_length=64)]],
    Field(max_length=32, description="Short labels, e.g. ['stripe', 'webhooks']."),
]
Project = Annotated[
    str | None,
    Field(description="Project to use; defaults to the server's LORE_PROJECT.", max_length=64),
]
LessonId = Annotated[
    str, Field(description="A lesson id as returned by save_lesson or recall_lessons.", max_length=64)
]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]


class OrderBy(BaseModel):
    column: Annotated[str, Field(max_length=64)]
    direction: Literal["asc", "desc"] = "asc"


READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
ADDITIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
EDITING = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


class LoreServer(MCPServer):
    """``MCPServer`` whose tool errors all carry a stable code and never internal detail.

    Over authenticated HTTP each call runs with ``current_caller`` set from the
    request's API key, which is what scopes it to an org and project; the key tools
    are listed only to root keys.
    """

    # The trusted caller of a server without API keys (stdio): a root of its own org.
    local_caller: Caller | None = None
    # Seconds a tool call may take (LORE_REQUEST_TIMEOUT_S); None: no limit.
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S

    async def list_tools(self) -> list[Any]:
        tools = [
            t.model_copy(
                update={
                    "input_schema": lean_schema(t.input_schema),
                    "output_schema": lean_schema(t.output_schema),
                }
            )
            for t in await super().list_tools()
        ]
        caller = caller_of(get_access_token()) or self.local_caller
        if caller is not None and caller.root:
            return tools
        return [t for t in tools if t.name not in ADMIN_TOOLS]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Run a tool under the request deadline; every failure becomes ``CODE: sentence``.

        The deadline travels to the store work on worker threads (``stores.deadline``),
        which stops itself and rolls back once it passes: cancelling this coroutine
        would not stop a thread, and could answer before the work had finished.
        """
        reset = current_caller.set(caller_of(get_access_token()))
        try:
            with deadline.limit(self.request_timeout_s):
                try:
                    return await super().call_tool(name, arguments, context)
                except ToolError as exc:
                    code, message = _tool_failure(name, exc, late=deadline.expired())
                    raise ToolError(wire_text(code, message)) from exc.__cause__
        finally:
            current_caller.reset(reset)

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        reset = current_caller.set(caller_of(get_access_token()))
        try:
            return await super().read_resource(uri, context)
        finally:
            current_caller.reset(reset)

    async def run_stdio_async(self) -> None:
        """Serve over stdio with Lore's transport, which answers malformed frames."""
        lowlevel = self._lowlevel_server
        async with stdio_transport() as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def _tool_failure(name: str, exc: ToolError, *, late: bool) -> tuple[str, str]:
    """The code and sentence for a failed tool call.

    Past the deadline, a failure the stores could not name (a statement SQLite or
    Postgres stopped) or an outage is reported as the deadline it really was.
    """
    cause = exc.__cause__
    anticipated = isinstance(cause, LoreError | StoreError | ValidationError)
    if late and (isinstance(cause, UnavailableError) or not anticipated):
        logger.warning("tool %s stopped at its deadline", name)
        return UNAVAILABLE, deadline.MESSAGE
    if anticipated:
        return describe(cause)  # type: ignore[arg-type]
    if cause is None and not isinstance(exc, UnexpectedToolError):
        return "NOT_FOUND", f"There is no tool named {name!r}; call tools/list to see them."
    return describe(cause or exc)


# Keywords that only constrain values of their own type, so a null passes them anyway.
_TYPE_ONLY_KEYWORDS = frozenset(
    "type format items minItems maxItems uniqueItems minLength maxLength pattern "
    "minimum maximum exclusiveMinimum exclusiveMaximum".split()
)


def lean_schema(schema: Any) -> Any:
    """A JSON schema without pydantic's generated ``title`` keywords, and with
    ``anyOf: [{type: T}, {type: null}]`` written as ``type: [T, null]``.

    Every listed tool costs an agent context on every turn, and titles repeat what the
    property names already say (about a fifth of the listing). A property *named*
    "title" is a schema object, not a string, so it stays. The shorter nullable form
    means the same and is quicker for clients to check results against.
    """
    if isinstance(schema, list):
        return [lean_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    lean = {k: lean_schema(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    options = lean.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = options[1 - options.index({"type": "null"})]
        if isinstance(other.get("type"), str) and set(other) <= _TYPE_ONLY_KEYWORDS:
            del lean["anyOf"]
            lean.update(other, type=[other["type"], "null"])
    return lean


class LoadModelAfterFirstRequest:
    """Middleware that starts loading the embedding model once the first request is answered.

    Loading on a thread while the handshake is served would compete with it for the
    interpreter, so the load starts right after the first response instead; a tool
    that needs vectors before then starts (and waits for) the load itself.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if not self.embedder.started:
                self.embedder.start()


def build_server(
    lessons: LessonService | None,
    *,
    keys: KeyTools | None = None,
    tools: Sequence[str] = DEFAULT_TOOL_GROUPS,
    log_level: LogLevel = "WARNING",
    server_class: type[LoreServer] = LoreServer,
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
    **settings: Any,
) -> LoreServer:
    """Create the server with the tools of the ``tools`` groups, the prompts and the resources;
    ``settings`` go to ``MCPServer`` (auth, token_verifier). ``request_timeout_s`` bounds
    every tool call (see ``LoreServer.call_tool``).

    The key tools (group ``admin``) need ``keys``: with API keys they are there for root keys
    whatever ``tools`` says; without (stdio), only when ``admin`` is asked for, and they then
    act on the server's own org. ``lessons`` is None only for a server class that answers
    calls itself (remote mode): the tools are then registered for their names and schemas alone.
    """
    server = server_class(
        name="lore",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level=log_level,
        middleware=[LoadModelAfterFirstRequest(lessons.embedder)] if lessons is not None else [],
        **settings,
    )
    server.request_timeout_s = request_timeout_s

    @server.tool(annotations=ADDITIVE)
    async def save_lesson(
        problem: Annotated[Text, Field(min_length=1, description="What went wrong or what was hard.")],
        resolution: Annotated[Text, Field(min_length=1, description="What fixed it or the answer found.")],
        context: Annotated[
            Text | None, Field(description="Where it happened: stack, versions, constraints.")
        ] = None,
        tags: Tags = [],  # noqa: B006 - the SDK copies defaults per call
        confidence: Annotated[Confidence, Field(description="How sure you are, 0..1.")] = 0.5,
        source: Annotated[
            Short | None, Field(description="Who or what taught this: agent, URL, ticket.")
        ] = None,
        project: Project = None,
        ttl_days: Annotated[
            float | None, Field(gt=0, le=36_500, description="Forget after this many days.")
        ] = None,
    ) -> SaveLessonResult:
        """Save a lesson after solving something non-obvious, so you and other agents recall it later.

        Secrets in the text are redacted before storing. A lesson that adds nothing to one already stored
        in the project (the same text, or a shorter restatement of each field with its words, numbers and
        names in the same order) merges into it (merged=true);
        anything else is kept as a new lesson, and its near neighbours come back in `similar` so you can
        update_lesson or delete_lesson one that says the same thing.
        """
        return await lessons.save(
            problem=problem,
            resolution=resolution,
            context=context,
            tags=tags,
            confidence=confidence,
            source=source,
            project=project,
            ttl_days=ttl_days,
        )

    @server.tool(annotations=READ_ONLY)
    async def recall_lessons(
        query: Annotated[Text, Field(min_length=1, description="Describe the problem or task at hand.")],
        tags: Annotated[Tags, Field(description="Only lessons carrying all of these tags.")] = [],  # noqa: B006
        project: Project = None,
        limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5,
        min_confidence: Annotated[
            Confidence, Field(description="Skip lessons less certain than this.")
        ] = 0.0,
        verbose: Annotated[bool, Field(description="Full records (source, times, meta).")] = False,
    ) -> RecallResult:
        """Recall lessons relevant to a problem, best first. Call this before starting a task that
        may have been solved before. Matches by meaning and by words; fresher, more confident and
        upvoted lessons rank higher."""
        return await lessons.recall(
            query=query,
            tags=tags,
            project=project,
            limit=limit,
            min_confidence=min_confidence,
            verbose=verbose,
        )

    @server.tool(annotations=ADDITIVE)
    async def upvote_lesson(id: LessonId, project: Project = None) -> VoteResult:
        """Upvote a lesson that helped, so it ranks higher for everyone."""
        return await lessons.vote(id, up=True, project=project)

    @server.tool(annotations=ADDITIVE)
    async def downvote_lesson(id: LessonId, project: Project = None) -> VoteResult:
        """Downvote a lesson that was wrong or stale, so it sinks."""
        return await lessons.vote(id, up=False, project=project)

    @server.tool(annotations=READ_ONLY)
    async def get_lesson(id: LessonId, project: Project = None) -> LessonOut:
        """Read one lesson in full by id."""
        return await lessons.get(id, project)

    @server.tool(annotations=EDITING)
    async def update_lesson(
        id: LessonId,
        project: Project = None,
        problem: Annotated[Text | None, Field(min_length=1)] = None,
        resolution: Annotated[Text | None, Field(min_length=1)] = None,
        context: Annotated[Text | None, Field(description="Empty string clears it.")] = None,
        tags: Annotated[Tags | None, Field(description="Replaces all tags.")] = None,
        confidence: Confidence | None = None,
        source: Annotated[Short | None, Field(description="Empty string clears it.")] = None,
        ttl_days: Annotated[
            float | None, Field(gt=0, le=36_500, description="Expire this many days from now.")
        ] = None,
    ) -> UpdateLessonResult:
        """Correct or refine a lesson; only the fields you pass change."""
        return await lessons.update(
            id,
            project=project,
            problem=problem,
            resolution=resolution,
            context=context,
            tags=tags,
            confidence=confidence,
            source=source,
            ttl_days=ttl_days,
        )

    @server.tool(annotations=DESTRUCTIVE)
    async def delete_lesson(id: LessonId, project: Project = None) -> DeleteResult:
        """Delete a lesson that is wrong beyond repair."""
        return await lessons.delete(id, project)

    @server.tool(annotations=READ_ONLY)
    async def list_lessons(
        project: Project = None,
        tags: Annotated[Tags, Field(description="Only lessons carrying all of these tags.")] = [],  # noqa: B006
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 20,
        cursor: Annotated[
            str | None, Field(max_length=64, description="next_cursor of the previous page.")
        ] = None,
        verbose: Annotated[bool, Field(description="Full records (source, times, meta).")] = False,
    ) -> ListResult:
        """List lessons newest first, a page at a time."""
        return await lessons.list(project=project, tags=tags, limit=limit, cursor=cursor, verbose=verbose)

    add_transfer_tools(server, Transfer(lessons) if lessons is not None else None)
    structured_service = StructuredService(lessons)  # type: ignore[arg-type]
    add_structured_tools(server, structured_service)
    authenticated = "token_verifier" in settings
    if keys is not None and (authenticated or "admin" in tools):
        add_key_tools(server, keys)
    if lessons is not None and not authenticated:
        # stdio (and --dev-no-auth): the local user is trusted, as a root of the server's org.
        server.local_caller = Caller(key_id="local", org=lessons.org, name="local", project=None, root=True)
    keep = {name for group in tools for name in TOOL_GROUPS[group]} | (
        ADMIN_TOOLS if authenticated else set()
    )
    for tool in [t.name for t in server._tool_manager.list_tools()]:
        if tool not in keep:
            server.remove_tool(tool)
    if lessons is not None:
        add_prompts_and_resources(server, lessons, structured_service)

    @server.resource(
        "lore://lessons/{id}",
        name="lesson",
        description="One lesson as JSON.",
        mime_type="application/json",
    )
    async def lesson_resource(id: str) -> str:
        try:
            lesson = await lessons.get(id)
        except (InvalidArgument, StoreError) as exc:
            raise ResourceNotFoundError(describe(exc)[1]) from None
        return lesson.model_dump_json()

    from lore_mcp.protocol_extras import add_protocol_extras  # logging, completion, subscriptions

    add_protocol_extras(server, lessons.default_project if lessons is not None else None)
    return server


def add_transfer_tools(server: LoreServer, transfer: Transfer | None) -> None:
    """export_lessons / import_lessons: moving lessons between Lore servers through MCP."""

    @server.tool(annotations=READ_ONLY)
    async def export_lessons(
        project: Project = None,
        cursor: Annotated[
            str | None, Field(max_length=64, description="next_cursor of the previous page.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)] = 100,
    ) -> ExportPage:
        """Export a project's lessons in full, a page at a time, for import_lessons elsewhere."""
        assert transfer is not None
        return await transfer.export_page(project, cursor, limit)

    @server.tool(annotations=ADDITIVE)
    async def import_lessons(
        lessons: Annotated[list[LessonIn], Field(min_length=1, max_length=MAX_IMPORT_BATCH)],
        project: Project = None,
    ) -> ImportResult:
        """Import lessons (as export_lessons returns them) into a project, keeping their ids: an id
        already stored is skipped, so importing twice adds nothing. Secrets are redacted first."""
        assert transfer is not None
        return await transfer.import_batch(lessons, project)


def add_structured_tools(server: LoreServer, tables: StructuredService) -> None:
    """schema / plan / apply / query_rows and history / get_commit / revert_commit."""

    @server.tool(annotations=READ_ONLY)
    async def schema(project: Project = None) -> dict[str, Any]:
        """Read this project's tables (columns, row counts) and its schema_hash. Call it before
        writing a plan: a plan carries the schema_hash it was made against."""
        return await tables.schema(project)

    @server.tool(annotations=READ_ONLY)
    async def plan(plan: PlanModel, project: Project = None) -> dict[str, Any]:
        """Dry-run a plan: returns ok, a risk level (low / medium / high), the predicted row and schema
        effects, and errors naming the failing operation. Changes nothing."""
        return await tables.plan(plan, project)

    @server.tool(annotations=DESTRUCTIVE)
    async def apply(plan: PlanModel, project: Project = None) -> dict[str, Any]:
        """Apply a plan to this project's tables, all operations or none, and record it as a commit.
        A plan made against an older schema is refused with STALE_PLAN: read schema and plan again."""
        return await tables.apply(plan, project)

    @server.tool(annotations=READ_ONLY)
    async def query_rows(
        table: Annotated[str, Field(max_length=64)],
        where: Annotated[list[RowFilter], Field(max_length=50, description="ANDed filters.")] = [],  # noqa: B006
        order_by: Annotated[list[OrderBy], Field(max_length=10)] = [],  # noqa: B006
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Field(max_length=4000)] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """Read rows of one of this project's tables, filtered and ordered (by id by default)."""
        return await tables.query_rows(
            table,
            where=[w.model_dump() for w in where],
            order_by=[o.model_dump() for o in order_by],
            limit=limit,
            cursor=cursor,
            project=project,
        )

    @server.tool(annotations=READ_ONLY)
    async def history(
        target: Annotated[
            str | None, Field(max_length=64, description="A lesson id or a table name; omit for everything.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, Field(max_length=20)] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """List this project's commits newest first: every lesson change, apply and revert."""
        return await tables.history(target, limit, cursor, project)

    @server.tool(annotations=READ_ONLY)
    async def get_commit(
        commit_id: Annotated[str, Field(max_length=64)], project: Project = None
    ) -> dict[str, Any]:
        """One commit in full: its rows before and after, and its schema changes."""
        return await tables.get_commit(commit_id, project)

    @server.tool(annotations=DESTRUCTIVE)
    async def revert_commit(
        commit_id: Annotated[str, Field(max_length=64)], project: Project = None
    ) -> dict[str, Any]:
        """Undo a commit with a new commit. Refused with CONFLICT (naming them) when later commits
        changed the same rows or tables; revert those first."""
        return await tables.revert_commit(commit_id, project)


def add_key_tools(server: LoreServer, keys: KeyTools) -> None:
    """create_key / list_keys / revoke_key: root keys only, always within the caller's org."""

    def _root_caller() -> Caller:
        caller = current_caller.get() or server.local_caller
        if caller is None:
            raise Forbidden("Key tools need a root API key.")
        return caller

    @server.tool(annotations=ADDITIVE)
    async def create_key(
        name: Annotated[str, Field(min_length=1, max_length=100, description="Who or what holds the key.")],
        project: Annotated[
            str | None, Field(max_length=64, description="Limit the key to this project; omit for all.")
        ] = None,
        root: Annotated[bool, Field(description="Also allow managing keys (all projects).")] = False,
    ) -> CreatedKey:
        """Create an API key in your org (root keys only). The key is shown once, in this result."""
        return await keys.create_key(_root_caller(), name, project, root)

    @server.tool(annotations=READ_ONLY)
    async def list_keys() -> KeyList:
        """List your org's API keys, revoked ones included; secrets are never shown (root keys only)."""
        return await keys.list_keys(_root_caller())

    @server.tool(annotations=EDITING)
    async def revoke_key(
        id: Annotated[str, Field(max_length=64, description="A key id from list_keys.")],
    ) -> KeyOut:
        """Revoke an API key of your org; it stops working on its next request (root keys only)."""
        return await keys.revoke_key(_root_caller(), id)


def add_prompts_and_resources(server: LoreServer, lessons: LessonService, tables: StructuredService) -> None:
    """Prompts that start the two habits Lore is for, and resources describing the memory."""

    @server.prompt(
        name="recall_before_task",
        description="Before starting a task, recall what earlier work learned about it.",
    )
    def recall_before_task(task: str) -> str:
        return (
            f"Before you start on this task, call recall_lessons with a query describing it:\n\n{task}\n\n"
            "Read the lessons that come back (best first). Apply what fits, say which lesson you used, "
            "and upvote_lesson the ones that helped; downvote_lesson any that turn out wrong or stale."
        )

    @server.prompt(
        name="record_lesson",
        description="After solving something non-obvious, save it as a lesson for next time.",
    )
    def record_lesson(what_happened: str = "") -> str:
        detail = f"\n\nWhat happened:\n{what_happened}" if what_happened else ""
        return (
            "Save what you just learned with save_lesson, so you and other agents do not solve it twice. "
            "problem: the symptom as someone would first meet it (error text, what failed). "
            "resolution: what fixed it and why. context: versions, stack, constraints. "
            "tags: a few short labels. confidence: how sure you are (0..1). Never include secrets; "
            "Lore redacts the ones it recognises." + detail
        )

    @server.resource(
        "lore://schema",
        name="schema",
        description="This project's tables, columns, row counts and schema_hash (as the schema tool).",
        mime_type="application/json",
    )
    async def schema_resource() -> str:
        return json.dumps(await tables.schema(None))

    @server.resource(
        "lore://stats",
        name="stats",
        description="How much memory there is: lessons, projects, tables, commits.",
        mime_type="application/json",
    )
    async def stats_resource() -> str:
        return json.dumps(await tables.stats(None))
