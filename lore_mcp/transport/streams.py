"""Standing streams of the team server, and how revocation ends them.

A ``GET /mcp`` stream carries notices long after it was authenticated, so a key revoked meanwhile would
go on hearing. ``StandingStreams`` re-verifies before any message passes (a notice, or the 15 s ping): one
revoked anywhere, or uncheckable (database down), ends the stream as a complete response, and the client
is asked for its key again. A revocation this process answers ends its streams at once.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lore_mcp.key_tokens import caller_of
from lore_mcp.tools.registry import SPECS

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken, TokenVerifier
    from mcp.server.context import ServerRequestContext

logger = logging.getLogger("lore_mcp.transport.http")


def credential_of(token: AccessToken) -> str:
    """What revocation names: the Lore key behind the token, else the token's client."""
    caller = caller_of(token)
    return caller.key_id if caller is not None else token.client_id


async def still_verifies(verifier: TokenVerifier, token: AccessToken) -> bool:
    """Whether ``token`` still verifies as the same unexpired credential; a failed check is a no."""
    try:
        current = await verifier.verify_token(token.token)
    except Exception as exc:  # KeyLookupUnavailable and whatever a verifier raises
        logger.warning("could not verify a standing stream's credential: %s", exc)
        return False
    if current is None or credential_of(current) != credential_of(token):
        return False
    return current.expires_at is None or current.expires_at >= int(time.time())


class StandingStreams:
    """Open standing streams by credential; ``middleware`` goes inside the SDK's auth, to see the caller."""

    def __init__(self, path: str, verifier: TokenVerifier | None) -> None:
        self.path = path
        self.verifier = verifier
        self._open: dict[str, set[anyio.CancelScope]] = {}

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            user = scope.get("user")
            standing = (
                scope["type"] == "http"
                and scope.get("method") == "GET"
                and scope.get("path", "").startswith(self.path)
                and isinstance(user, AuthenticatedUser)
                and self.verifier is not None
            )
            if not standing:
                await app(scope, receive, send)
                return
            assert isinstance(user, AuthenticatedUser)
            await self._serve(app, user.access_token, scope, receive, send)

        return guarded

    async def _serve(
        self, app: ASGIApp, token: AccessToken, scope: Scope, receive: Receive, send: Send
    ) -> None:
        credential = credential_of(token)
        started = finished = False

        async def checked(message: Message) -> None:
            nonlocal started, finished
            if (
                message["type"] == "http.response.body"
                and message.get("body")
                and not await self.valid(token)
            ):
                logger.info("ending a standing stream: its credential no longer verifies")
                stream.cancel()  # the message is dropped; the stream ends at the next checkpoint
                return
            await send(message)
            started = started or message["type"] == "http.response.start"
            finished = finished or (message["type"] == "http.response.body" and not message.get("more_body"))

        with anyio.CancelScope() as stream:
            self._open.setdefault(credential, set()).add(stream)
            try:
                await app(scope, receive, checked)
            finally:
                streams = self._open.get(credential, set())
                streams.discard(stream)
                if not streams:
                    self._open.pop(credential, None)
        if stream.cancelled_caught and started and not finished:
            with contextlib.suppress(OSError):  # the client may be gone already
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def valid(self, token: AccessToken) -> bool:
        """Whether ``token`` still verifies (``still_verifies``)."""
        assert self.verifier is not None
        return await still_verifies(self.verifier, token)

    def close(self, credential: str) -> int:
        """End every standing stream of ``credential`` now; how many there were."""
        streams = list(self._open.get(credential, ()))
        for stream in streams:
            stream.cancel()
        return len(streams)

    async def after_revoke(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """Once a tool that ``revokes`` (registry) has revoked a key, end its streams."""
        result = await call_next(ctx)
        spec = SPECS.get(str((ctx.params or {}).get("name")))
        if ctx.method == "tools/call" and spec is not None and spec.revokes and isinstance(result, Mapping):
            revoked = (result.get("structuredContent") or {}).get("id")
            if not result.get("isError") and isinstance(revoked, str):
                self.close(revoked)
        return result
