"""What the per-key rate limit counts (``lore_mcp.transport.guards``) and the in-process
window's arithmetic for several calls at once; the body is read off the wire once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lore_mcp.transport.guards import (
    MESSAGE_KEY,
    CallLimiter,
    SlidingWindowLimiter,
    jsonrpc_message,
    tool_calls,
)
from stores.errors import UnavailableError


def request(method: str, id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    return message


@pytest.mark.parametrize(
    ("message", "counted"),
    [
        (request("tools/call"), 1),
        (request("initialize"), 0),
        (request("server/discover"), 0),
        (request("tools/list"), 0),
        (request("resources/read"), 0),
        (request("prompts/get"), 0),
        (request("ping"), 0),
        (request("notifications/initialized", None), 0),
        ([request("tools/call", 1), request("tools/list", 2), request("tools/call", 3)], 2),
        (None, 0),
        ("tools/call", 0),
        ([1, "tools/call"], 0),
    ],
)
def test_only_tool_calls_are_counted(message: Any, counted: int) -> None:
    assert tool_calls(message) == counted


def test_several_calls_at_once_fit_only_whole() -> None:
    now = [0.0]
    window = SlidingWindowLimiter(3, window=60, clock=lambda: now[0])
    assert window.hit("k", 2) is None
    now[0] = 10.0
    assert window.hit("k", 2) == 50.0  # the first two must leave the window first
    assert window.hit("k", 1) is None
    assert window.hit("k", 4) == 60  # more than the limit never fits
    now[0] = 60.0
    assert window.hit("k", 2) is None


async def test_the_in_process_limiter_counts_per_key() -> None:
    limiter = CallLimiter(2)
    assert await limiter.take("a", 2) is None
    assert await limiter.take("a", 1) is not None
    assert await limiter.take("b", 1) is None


class DownCounts:
    def take(self, key_id: str, calls: int, limit: int, window_s: int) -> float | None:
        raise UnavailableError("The database is not answering.")


async def test_a_count_the_database_cannot_make_lets_the_call_through() -> None:
    assert await CallLimiter(1, DownCounts()).take("a", 1) is None


async def test_the_body_is_read_once_and_handed_on_whole() -> None:
    body = json.dumps(request("tools/call")).encode()
    parts = [
        {"type": "http.request", "body": body[:10], "more_body": True},
        {"type": "http.request", "body": body[10:], "more_body": False},
    ]
    reads = 0

    async def receive() -> Any:
        nonlocal reads
        reads += 1
        return parts.pop(0) if parts else {"type": "http.disconnect"}

    scope: dict[str, Any] = {"type": "http"}
    message, replay = await jsonrpc_message(scope, receive)
    assert message == request("tools/call") and scope[MESSAGE_KEY] == message
    again, same = await jsonrpc_message(scope, replay)  # a later guard: nothing more is read
    assert again == message and same is replay and reads == 2
    assert await replay() == {"type": "http.request", "body": body, "more_body": False}
    assert await replay() == {"type": "http.disconnect"}


async def test_a_body_over_the_size_limit_is_not_parsed_but_handed_on() -> None:
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    chunk = b"x" * (DEFAULT_MAX_REQUEST_BODY_SIZE // 2 + 1)
    parts = [{"type": "http.request", "body": chunk, "more_body": True} for _ in range(3)]
    parts[-1]["more_body"] = False

    async def receive() -> Any:
        return parts.pop(0)

    message, replay = await jsonrpc_message({"type": "http"}, receive)
    assert message is None
    handed = [await replay() for _ in range(2)]
    assert b"".join(m["body"] for m in handed) == chunk * 3
    assert [m["more_body"] for m in handed] == [True, False]
