"""The bearer side of API keys: ``TokenVerifier`` and the caller behind a token. Apart from ``auth``
since it needs the MCP SDK, which non-HTTP processes (hooks, the key commands) then never import."""

from __future__ import annotations

import collections
import logging
import time
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.auth.provider import AccessToken

from lore_mcp.auth import (
    KEY_PATTERN,
    LOOKUP_TIMEOUT_S,
    NEGATIVE_CACHE_MAX,
    NEGATIVE_TTL_S,
    TOUCH_INTERVAL_S,
    Caller,
    KeyLookupUnavailable,
    secret_digest,
)
from stores import ApiKey, KeyStore, StoreError

logger = logging.getLogger("lore_mcp.auth")


class LoreAccessToken(AccessToken):
    """The SDK's access token carrying the Lore caller it was issued to."""

    caller: Caller


class ApiKeyVerifier:
    """Each request looks the key up (revocation is immediate), unless malformed or just refused."""

    def __init__(self, keys: KeyStore, *, lookup_timeout_s: float = LOOKUP_TIMEOUT_S) -> None:
        self.keys, self.lookup_timeout_s = keys, lookup_timeout_s
        self._touched: dict[str, float] = {}
        self._refused: collections.OrderedDict[str, float] = collections.OrderedDict()
        # Keys a person's page holds (``lore-memory ui``'s): people, known by key, never a client's name.
        self.people: frozenset[str] = frozenset()

    async def verify_token(self, token: str) -> AccessToken | None:
        if not KEY_PATTERN.fullmatch(token):
            return None
        digest = secret_digest(token)
        if self._refused.get(digest, 0.0) > time.monotonic():  # refused just now: not asked again yet
            return None
        self._refused.pop(digest, None)
        key = await self.bounded(self.keys.key_by_hash, digest)
        if key is None or key.revoked_at is not None:
            self._refused[digest] = time.monotonic() + NEGATIVE_TTL_S
            self._refused.move_to_end(digest)
            while len(self._refused) > NEGATIVE_CACHE_MAX:
                self._refused.popitem(last=False)
            return None
        await self._touch(key)
        caller = Caller.of(key, person=key.id in self.people)
        return LoreAccessToken(token=token, client_id=key.id, scopes=[], caller=caller)

    async def bounded(self, lookup: Any, *args: Any) -> Any:
        """``lookup`` on a thread; failing or overrunning is ``KeyLookupUnavailable``, never a bad key. The
        thread is abandoned at the deadline: a silent database must not hold the request."""
        try:
            with anyio.fail_after(self.lookup_timeout_s):
                return await anyio.to_thread.run_sync(lookup, *args, abandon_on_cancel=True)
        except TimeoutError:
            logger.warning("API key lookup did not answer within %.0f s", self.lookup_timeout_s)
            raise KeyLookupUnavailable(
                f"The key store did not answer within {self.lookup_timeout_s:.0f} s."
            ) from None
        except StoreError as exc:
            logger.warning("API key lookup failed: %s", exc)
            raise KeyLookupUnavailable(str(exc)) from exc

    async def _touch(self, key: ApiKey) -> None:
        now = time.monotonic()
        if now - self._touched.get(key.id, -TOUCH_INTERVAL_S) < TOUCH_INTERVAL_S:
            return
        self._touched[key.id] = now
        try:
            await self.bounded(self.keys.touch_key, key.org, key.id, datetime.now(UTC))
        except KeyLookupUnavailable as exc:  # last-used is informative; never refuse a valid key over it
            logger.warning("could not record key use: %s", exc.message)


def caller_of(token: Any) -> Caller | None:
    """The Lore caller behind an SDK access token, if it is one of ours."""
    return token.caller if isinstance(token, LoreAccessToken) else None
