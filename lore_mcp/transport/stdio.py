"""MCP over stdio that answers malformed frames, which the SDK drops, leaving the client to time out:
-32700 for text that is not JSON (or the SDK's parser refuses: deep nesting, lone surrogates), -32600 for
non-JSON-RPC and lines over ``MAX_LINE_BYTES`` (never read whole), with the id if recoverable, else
``null`` (JSON-RPC 2.0). At end of input running requests are answered (within ``EOF_DRAIN_S``). fd 1
points at stderr while serving so a stray ``print`` cannot corrupt the stream; frames use a duplicate."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

logger = logging.getLogger("lore_mcp.transport.stdio")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# HTTP's body limit (4 MiB), so a call that works over one transport works over the other.
MAX_LINE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
# How much of an over-long line is kept (to find its id) and how much is skipped per read.
_HEAD_BYTES = 4096
_SKIP_BYTES = 1 << 20
EOF_DRAIN_S = 60.0  # how long the end of input waits for the requests still running to be answered
# An id that appears before any nested object or array opens belongs to the top level.
_LEADING_ID = re.compile(r'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


@contextlib.asynccontextmanager
async def stdio_transport(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[SessionMessage]]]:
    """Yield (read, write) streams for ``Server.run`` over the process's stdin and stdout."""
    restore = None
    if stdout is None:
        stdout, restore = _claim_stdout()
    stdin = stdin or sys.stdin.buffer
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    unanswered = _Unanswered()

    async def reader(errors: MemoryObjectSendStream[SessionMessage]) -> None:
        async with read_send, errors:
            await _read_messages(stdin, read_send, errors, unanswered)
            # End of input cancels running requests: a client piping requests then closing stdin
            # would get no answers. Let them finish.
            with anyio.move_on_after(EOF_DRAIN_S):
                await unanswered.none()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader, write_send.clone())
            tg.start_soon(_write_messages, write_recv, stdout, unanswered)
            try:
                yield read_recv, write_send
            finally:
                tg.cancel_scope.cancel()
    finally:
        if restore is not None:
            restore()


async def _write_messages(
    messages: MemoryObjectReceiveStream[SessionMessage], out: BinaryIO, unanswered: _Unanswered
) -> None:
    """Each message a line, written and flushed on one worker thread (a full pipe blocks it, not the loop)."""
    async with messages:
        async for item in messages:
            unanswered.answered(item.message)
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            await anyio.to_thread.run_sync(_send, out, data.encode("utf-8", errors="replace") + b"\n")


def _send(out: BinaryIO, line: bytes) -> None:
    out.write(line)  # buffered: all of it, however many writes the pipe takes
    out.flush()


class _Unanswered:
    """Ids read and not yet answered (not listen streams, open till the client leaves, nor cancelled)."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self._empty = anyio.Event()

    def read(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCRequest) and message.method != "subscriptions/listen":
            self.ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self.answered_id((message.params or {}).get("requestId"))

    def answered(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.answered_id(message.id)

    def answered_id(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self._empty.set()

    async def none(self) -> None:
        if self.ids:
            self._empty = anyio.Event()
            await self._empty.wait()


async def _read_messages(
    stdin: BinaryIO,
    messages: MemoryObjectSendStream[Any],
    errors: MemoryObjectSendStream[SessionMessage],
    unanswered: _Unanswered,
) -> None:
    """Each ``stdin`` line on as a message; a bad one gets an error on ``errors``, not a closed session."""
    while True:
        line, too_long = await anyio.to_thread.run_sync(read_line, stdin, abandon_on_cancel=True)
        if too_long:
            await errors.send(SessionMessage(too_long_reply(line)))
            continue
        if not line:
            return
        if not line.strip():
            continue
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            reply = error_reply(line, exc)
            if reply is not None:
                await errors.send(SessionMessage(reply))
            continue
        unanswered.read(message)
        await messages.send(SessionMessage(message))


def read_line(stdin: BinaryIO) -> tuple[bytes, bool]:
    """The next line and whether it was over ``MAX_LINE_BYTES`` (then only its start; the rest is skipped)."""
    line = stdin.readline(MAX_LINE_BYTES + 1)
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
        return line, False
    head = line[:_HEAD_BYTES]
    del line
    while True:
        rest = stdin.readline(_SKIP_BYTES)
        if not rest or rest.endswith(b"\n"):
            return head, True


def too_long_reply(head: bytes) -> types.JSONRPCError:
    """The JSON-RPC error for a line over ``MAX_LINE_BYTES``, with the id from its start."""
    logger.warning("refused a line over %d bytes", MAX_LINE_BYTES)
    message = (
        f"Request too large: a message on stdio may be at most {MAX_LINE_BYTES} bytes "
        f"({MAX_LINE_BYTES // (1 << 20)} MiB), the limit on an HTTP request body too; "
        "send less in one call, for example import lessons in smaller batches."
    )
    return _error(_recover_id(head, None), INVALID_REQUEST, message)


def error_reply(line: bytes, exc: ValidationError) -> types.JSONRPCError | None:
    """The JSON-RPC error for a line the SDK refused, or None when it was not a request."""
    invalid_json = any(e["type"] == "json_invalid" for e in exc.errors())
    try:  # Python's parser accepts what the SDK's refuses, enough to find the id the client awaits
        parsed: Any = json.loads(line)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict) and "method" not in parsed and ("result" in parsed or "error" in parsed):
        logger.warning("dropped a malformed response from the client")
        return None
    if invalid_json:
        code = PARSE_ERROR
        message = f"Parse error: the line is not JSON this server can read ({exc.errors()[0]['msg']})."
    else:
        code, message = INVALID_REQUEST, "Invalid Request: the JSON is not a JSON-RPC 2.0 message."
    logger.info("answered a malformed frame with %s", code)
    return _error(_recover_id(line, parsed), code, message)


def _error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _recover_id(line: bytes, parsed: Any) -> int | str | None:
    candidate: Any = None
    if isinstance(parsed, dict):
        candidate = parsed.get("id")
    else:
        match = _LEADING_ID.match(line[:4096].decode("utf-8", errors="replace"))
        if match:
            with contextlib.suppress(ValueError):
                candidate = json.loads(match.group(1))
    return None if isinstance(candidate, bool) or not isinstance(candidate, int | str) else candidate


def _claim_stdout() -> tuple[BinaryIO, Any]:
    """Move the wire to a private fd and point fd 1 at stderr; returns (wire, restore)."""
    sys.stdout.flush()
    try:
        private = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        return sys.stdout.buffer, None
    wire = os.fdopen(private, "wb", closefd=False)

    def restore() -> None:
        with contextlib.suppress(OSError):
            os.dup2(private, 1)

    return wire, restore
