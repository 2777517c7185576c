"""Remote mode: a stdio server forwarding every call to a team server. It lists its own tools, so listings
work with the team server down; calls are redacted *before* leaving, over one kept-open HTTP session."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
from anyio.abc import TaskGroup
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, TextContent

from lore_mcp.errors import UNAUTHORIZED, UNAVAILABLE, LoreError, wire_text
from lore_mcp.redaction import redact
from lore_mcp.tools.registry import ADMIN_TOOLS
from lore_mcp.transport.server import LoreServer

logger = logging.getLogger("lore_mcp.transport.remote")
T = TypeVar("T")

CONNECT_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 120.0  # a call may wait on the team server's model load or a large apply


class RemoteUnavailable(LoreError):
    code = UNAVAILABLE


def no_endpoint(url: str, consequence: str) -> str:
    """The sentence for a URL where a server answers 404: a wrong path, not a server down."""
    return (
        f"There is no Lore endpoint at {url}: the server there answered 404 Not Found, {consequence}; "
        f"{api_url_fix(url)}."
    )


def api_url_fix(url: str) -> str:
    """What to set LORE_API_URL to, with this server's own /mcp as the example."""
    parts = urlsplit(url)
    example = f"{parts.scheme}://{parts.netloc}/mcp"
    return f"set LORE_API_URL to the team server's base URL or its /mcp endpoint, such as {example}"


def redact_arguments(value: Any, found: set[str]) -> Any:
    """Every string in the arguments, however deep, with secrets replaced (their kinds added to ``found``)."""
    if isinstance(value, str):
        result = redact(value)
        found.update(result.kinds)
        return result.text
    if isinstance(value, list):
        return [redact_arguments(v, found) for v in value]
    return {k: redact_arguments(v, found) for k, v in value.items()} if isinstance(value, dict) else value


class RemoteConnection:
    """One session to the team server, opened on first use, reopened after a failure; a background task
    owns the SDK client (entered and left in one task), any task uses it."""

    def __init__(self, url: str, api_key: str) -> None:
        self.url, self.api_key = url, api_key
        self._client: Client | None = None
        self._lock = anyio.Lock()
        self._closed: anyio.Event | None = None
        self._task_group: TaskGroup | None = None
        self._last_status: int | None = None
        # A 404 outside a session: nothing here speaks MCP (inside one, the server forgot the session).
        self._no_endpoint = False

    async def __aenter__(self) -> RemoteConnection:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        await self._task_group.__aexit__(None, None, None)

    async def use(self, request: Callable[[Client], Awaitable[T]]) -> T:
        """``request``'s answer over the session, or a ``LoreError`` saying what failed."""
        # A status from an earlier call (or from connecting) must not explain this one.
        self._last_status, self._no_endpoint = None, False
        client = await self._connected()
        self._last_status, self._no_endpoint = None, False
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                return await request(client)
        except TimeoutError:
            await self._drop()
            raise RemoteUnavailable(
                f"The team server at {self.url} did not answer within {CALL_TIMEOUT_S:.0f} s; "
                "the call may or may not have been applied there. Check history before retrying a write."
            ) from None
        except Exception as exc:
            await self._drop()
            raise self._explain(exc) from exc

    async def _connected(self) -> Client:
        async with self._lock:
            if self._client is not None:
                return self._client
            assert self._task_group is not None
            ready = anyio.Event()
            failure: list[BaseException] = []
            self._closed = anyio.Event()
            self._task_group.start_soon(self._hold, ready, failure, self._closed)
            with anyio.move_on_after(CONNECT_TIMEOUT_S):
                await ready.wait()
            if failure or self._client is None:
                self._closed.set()
                raise self._explain(failure[0] if failure else TimeoutError())
            return self._client

    async def _hold(self, ready: anyio.Event, failure: list[BaseException], closed: anyio.Event) -> None:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=httpx2.Timeout(CALL_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
            event_hooks={"response": [self._seen]},
        )
        try:
            async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
                self._client = client
                ready.set()
                await closed.wait()
        except Exception as exc:  # the connection failed to open, or broke while held
            logger.info("team server connection ended: %r", exc)
            failure.append(exc)
        finally:
            self._client = None
            ready.set()

    async def _seen(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._last_status = response.status_code
            if response.status_code == 404 and "mcp-session-id" not in response.request.headers:
                self._no_endpoint = True

    async def _drop(self) -> None:
        async with self._lock:
            if self._closed is not None:
                self._closed.set()
            self._client = None

    def _explain(self, exc: BaseException) -> LoreError:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]  # a failure while connecting arrives in task-group wrappers
        message = str(exc)
        statuses = (self._last_status, getattr(getattr(exc, "response", None), "status_code", None))
        if 503 in statuses or 401 in statuses:
            return self._refused(message, statuses)
        if isinstance(exc, TimeoutError):
            return RemoteUnavailable(
                f"The team server at {self.url} did not answer within {CONNECT_TIMEOUT_S:.0f} s; "
                "nothing was sent. Check LORE_API_URL and that the server is running."
            )
        if message.startswith("RATE_LIMITED"):  # worded by the team server: passed on as it is
            code, _, sentence = message.partition(": ")
            return LoreError(sentence, code)
        if self._no_endpoint:
            return RemoteUnavailable(no_endpoint(self.url, "so nothing was sent"))
        if 404 in statuses:
            return RemoteUnavailable(
                f"The team server at {self.url} no longer knows this connection's session (it restarted, "
                "or another replica answered), so nothing was changed; try again."
            )
        status = next((s for s in statuses if s is not None and s >= 400), None)
        if status is not None:
            return RemoteUnavailable(
                f"The server at {self.url} answered HTTP {status} instead of Lore's MCP endpoint, so nothing "
                "was changed; check LORE_API_URL (the team server's base URL or its /mcp endpoint) and "
                "that the server is healthy."
            )
        return RemoteUnavailable(
            f"Cannot reach the team server at {self.url}, so nothing was changed: check LORE_API_URL "
            "and that the server is running, then try again."
        )

    def _refused(self, message: str, statuses: tuple[int | None, ...]) -> LoreError:
        """A team server that answered 503 (itself or its database down) or 401 (the key)."""
        if message.startswith("UNAVAILABLE") and 503 in statuses:
            # The team server answered, but its database did not: the key was never checked.
            return RemoteUnavailable(
                f"The team server at {self.url} is running but its database is unreachable or not "
                "answering, so it could not check LORE_API_KEY or do anything; nothing was changed. "
                "Try again shortly; if it lasts, tell the team server's admin."
            )
        if 503 in statuses:
            return RemoteUnavailable(
                f"The team server at {self.url} answered 503 Service Unavailable; nothing was changed. "
                "Try again shortly; if it lasts, tell the team server's admin."
            )
        return LoreError(
            f"The team server at {self.url} refused LORE_API_KEY (unknown, revoked or malformed); "
            "ask an admin for a key (`lore-memory keys create`).",
            UNAUTHORIZED,
        )


class RemoteLoreServer(LoreServer):
    def __init__(
        self, services: None, *, remote: RemoteConnection, default_project: str | None, **settings: Any
    ) -> None:
        """``default_project`` (LORE_PROJECT) fills calls naming no project, else the team server decides."""
        super().__init__(services, **settings)
        self.remote, self.default_project = remote, default_project

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Forward the call by name and arguments, redacted, once its arguments fit the schema."""
        schema = self._tool_input_schema(name)
        if schema is None and name not in ADMIN_TOOLS:
            raise ToolError(
                wire_text("NOT_FOUND", f"There is no tool named {name!r}; call tools/list to see them.")
            )
        # Checked here too: an older team server drops unknown arguments; NaN would go as null silently.
        self.check_call(name, arguments)
        found: set[str] = set()
        clean = redact_arguments(arguments, found)
        takes_project = schema is not None and "project" in schema.get("properties", {})
        if self.default_project is not None and takes_project and clean.get("project") is None:
            clean["project"] = self.default_project
        try:
            result = await self.remote.use(lambda client: client.call_tool(name, clean))
        except LoreError as exc:
            raise ToolError(wire_text(exc.code, exc.message)) from None
        return _report_redactions(result, found) if found and not result.is_error else result

    async def run_stdio_async(self) -> None:
        async with self.remote:
            await super().run_stdio_async()

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        try:
            result = await self.remote.use(lambda client: client.read_resource(str(uri)))
        except LoreError as exc:
            raise ResourceError(wire_text(exc.code, exc.message)) from None
        return [
            ReadResourceContents(c.text if hasattr(c, "text") else base64.b64decode(c.blob), c.mime_type)
            for c in result.contents
        ]


def _report_redactions(result: CallToolResult, found: set[str]) -> CallToolResult:
    """Add what was redacted here to the result's ``redacted`` list, as the server would have."""
    data = result.structured_content
    if not isinstance(data, dict) or not isinstance(data.get("redacted"), list):
        return result
    data = dict(data, redacted=sorted(set(data["redacted"]) | found))
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, indent=2))],
        structured_content=data,
        is_error=False,
    )
