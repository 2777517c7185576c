"""A 2026-07-28 multi-round-trip request started on one replica and finished on the other.

The SDK seals the ``requestState`` a server hands back with an ``input_required`` result, and
opens it again when the client retries. Behind a load balancer without affinity the retry can
reach another replica, so every replica must hold the same key (``LORE_REQUEST_STATE_SECRET``,
``lore_mcp.transport.http.share_request_state``). Two of Lore's HTTP apps on real sockets, each
with a prompt that asks for one more round, and a client alternating between them.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

import pytest
import uvicorn
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult

from lore_mcp.transport.http import build_app, server_config
from lore_mcp.transport.server import LoreServer
from tests.support.replicas import alternating_client
from tests.support.team import free_port, running

MODE = "2026-07-28"


def two_rounds(ctx: Context) -> InputRequiredResult | str:
    """Round one hands back state; round two (the client's retry) shows what it opened."""
    if ctx.request_state is None:
        request = ctx.request_context.request
        assert request is not None
        return InputRequiredResult(request_state=f"started on port {request.url.port}")
    return f"finished: {ctx.request_state}"


@contextlib.contextmanager
def replica(keys: Sequence[str]) -> Iterator[str]:
    """Lore's HTTP app (no auth, loopback) with the ``two_rounds`` prompt; yields its /mcp URL."""
    server = LoreServer(None, tools=[])
    server.prompt(name="two_rounds")(two_rounds)
    app = build_app(
        server,
        host="127.0.0.1",
        health=lambda: None,
        store_name="test",
        rate_limit_per_minute=1000,
        request_state_keys=keys,
    )
    port = free_port()
    config = server_config(app, host="127.0.0.1", port=port, log_level="warning", drain_timeout_s=5)
    with running(uvicorn.Server(config)):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_a_round_sealed_by_one_replica_is_opened_by_the_other() -> None:
    shared = [secrets.token_hex(32)]
    with replica(shared) as a, replica(shared) as b:
        async with alternating_client([a, b], "unused", mode=MODE) as (client, robin):
            result = await client.get_prompt("two_rounds")
    rounds = [s.replica for s in robin.sent if s.rpc_method == "prompts/get"]
    assert rounds == [0, 1] or rounds == [1, 0], robin.sent
    text = result.messages[0].content.text  # type: ignore[union-attr]
    assert text == f"finished: started on port {urlsplit([a, b][rounds[0]]).port}"


async def test_without_the_setting_each_process_has_its_own_key() -> None:
    """The SDK's default, kept when ``LORE_REQUEST_STATE_SECRET`` is unset: the other replica
    refuses the retry, which is why ``LORE_STATELESS_HTTP`` on Postgres needs the secret."""
    with replica(()) as a, replica(()) as b:
        async with alternating_client([a, b], "unused", mode=MODE) as (client, robin):
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await client.get_prompt("two_rounds")
    assert [s.replica for s in robin.sent if s.rpc_method == "prompts/get"] in ([0, 1], [1, 0])
