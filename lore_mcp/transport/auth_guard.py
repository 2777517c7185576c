"""``AuthGuard``: the answer to a key store that cannot be asked, and the per-address failed-login limit,
outside the SDK's auth so it sees what the bearer check answers and raises."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from lore_mcp.auth import KeyLookupUnavailable
from lore_mcp.transport.guards import (
    HEALTH_PATH,
    MAX_TRACKED,
    MCP_PATH,
    UNAVAILABLE_JSONRPC_CODE,
    SlidingWindowLimiter,
    bearer_digest,
    client_address,
    count_failure,
    has_authorization,
    refuse_too_many,
    request_id,
    send_jsonrpc_error,
)

if TYPE_CHECKING:
    from stores import CallCounts

# How ``/mcp``'s failed authentications are counted across replicas (``count_failure``).
FAILED_AUTH_DOOR = "failed-auth"


class AuthGuard:
    """A lookup that could not be made is 503 ``UNAVAILABLE``, not 401: the key may be fine. Past the
    per-address failed-login limit, 429 before any lookup, unless its key was accepted before, so one
    misconfigured client behind a shared address does not lock out its neighbours."""

    def __init__(
        self, app: ASGIApp, failures: SlidingWindowLimiter, shared: CallCounts | None = None
    ) -> None:
        self.app = app
        self.failures = failures
        self.shared = shared
        self._accepted: collections.OrderedDict[str, None] = collections.OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        address = client_address(scope)
        path = scope.get("path", "")
        if path.startswith(MCP_PATH) or (path == HEALTH_PATH and has_authorization(scope)):
            wait = self.failures.wait(address)
            if wait is not None and bearer_digest(scope) not in self._accepted:
                why = f"{self.failures.limit} failed authentications in a minute from this address"
                await refuse_too_many(scope, receive, send, wait, why, " with a valid API key")
                return
        started = read = False

        async def watch(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if message["status"] == 401:
                    await count_failure(self.failures, address, self.shared, door=FAILED_AUTH_DOOR)
                else:
                    self._accept(scope)
            await send(message)

        async def reading() -> Any:
            nonlocal read
            read = True
            return await receive()

        try:
            await self.app(scope, reading, watch)
        except KeyLookupUnavailable:
            if started:
                raise
            # The key is checked before the body is read, so the body is normally still there.
            await self._unavailable(send, None if read else await request_id(scope, receive))

    @staticmethod
    async def _unavailable(send: Send, id: str | int | None) -> None:
        await send_jsonrpc_error(
            send,
            status=503,
            code=UNAVAILABLE_JSONRPC_CODE,
            message="UNAVAILABLE: The team server's database is unreachable or not answering, so it "
            "could not check the API key; nothing was done. Try again shortly.",
            retry_after=5,
            id=id,
        )

    def _accept(self, scope: Scope) -> None:
        """Remember the key of an answered request, which the lock lets through (see above)."""
        if isinstance(scope.get("user"), AuthenticatedUser):
            digest = bearer_digest(scope)
            if digest is not None:
                self._accepted[digest] = None
                self._accepted.move_to_end(digest)
                while len(self._accepted) > MAX_TRACKED:
                    self._accepted.popitem(last=False)
