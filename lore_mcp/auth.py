"""API keys and who is calling: key format, the bearer-token verifier, the caller.

A key is ``lore_sk_`` followed by 32 random letters and digits. Only its SHA-256
is stored (``stores.engine.keys``), so a leaked database does not leak keys. Over HTTP
every request is checked by ``ApiKeyVerifier`` (the SDK's ``token_verifier``);
the tools then read the caller from the request's access token (``caller_of``) to
pick the org and check the project. Over stdio there is no caller: the local user is trusted.

A key that does not exist or is revoked is refused (401). A lookup that fails
because the database cannot be asked raises ``KeyLookupUnavailable`` instead, which
``lore_mcp.transport.http`` answers with 503 / ``UNAVAILABLE``: an outage is not a bad key.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import re
import secrets
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from mcp.server.auth.provider import AccessToken

from lore_mcp.errors import FORBIDDEN, UNAVAILABLE, LoreError
from stores.engine.keys import ApiKey, KeyStore
from stores.errors import StoreError

logger = logging.getLogger("lore_mcp.auth")

KEY_PREFIX = "lore_sk_"
KEY_BODY_CHARS = 32
KEY_PATTERN = re.compile(r"^lore_sk_[A-Za-z0-9]{32}$")
_ALPHABET = string.ascii_letters + string.digits
# How much of a key is stored for display: enough to tell keys apart, far too little to guess one.
DISPLAY_CHARS = len(KEY_PREFIX) + 4
# last_used_at is written at most this often per key, so auth does not turn every read into a write.
TOUCH_INTERVAL_S = 60.0
# A key lookup normally takes milliseconds; one that has not answered in this long is an outage.
LOOKUP_TIMEOUT_S = 5.0
# A well-formed key the store did not know (or knew as revoked) is refused without asking again
# for this long. Keys are 190 random bits, so no key created later can be one already refused;
# revocation is never undone. The bound keeps memory flat whatever a guesser sends.
NEGATIVE_TTL_S = 60.0
NEGATIVE_CACHE_MAX = 10_000


class Forbidden(LoreError):
    """The caller's key does not reach what it asked for."""

    code = FORBIDDEN


class KeyLookupUnavailable(LoreError):
    """The key store could not be asked, so the key is neither accepted nor refused."""

    code = UNAVAILABLE


def new_key() -> str:
    """A fresh random key (about 190 bits from the OS's CSPRNG)."""
    return KEY_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(KEY_BODY_CHARS))


def secret_digest(secret: str) -> str:
    """What the store keeps instead of a secret: an API key, or an OAuth code or token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def display_prefix(key: str) -> str:
    return key[:DISPLAY_CHARS] + "…"


@dataclass(frozen=True)
class Caller:
    """An authenticated API key, as the tools see it."""

    key_id: str
    org: str
    name: str
    project: str | None  # None: every project of the org
    root: bool

    @classmethod
    def of(cls, key: ApiKey) -> Caller:
        return cls(key_id=key.id, org=key.org, name=key.name, project=key.project, root=key.root)

    @property
    def actor(self) -> str:
        """How commits made with this key name their author."""
        return f"key:{self.name}"

    def project_for(self, requested: str | None, default: str) -> str:
        """The project a call acts on: a project-scoped key only ever reaches its own."""
        if self.project is None:
            return requested if requested is not None else default
        if requested is not None and requested != self.project:
            raise Forbidden(
                f"This API key is limited to project {self.project!r}; it cannot reach project "
                f"{requested!r}. Omit project, or use a key for that project."
            )
        return self.project

    def require_root(self, what: str) -> None:
        if not self.root:
            raise Forbidden(f"Only a root key can {what}; this key is not one.")


class LoreAccessToken(AccessToken):
    """The SDK's access token carrying the Lore caller it was issued to."""

    caller: Caller


class ApiKeyVerifier:
    """``TokenVerifier`` for Lore API keys: every request looks the key up, so revocation is immediate.

    Only a key that is well formed and not refused moments ago costs a lookup (see
    ``NEGATIVE_TTL_S``). A lookup that fails or does not answer within
    ``LOOKUP_TIMEOUT_S`` raises ``KeyLookupUnavailable``; it never reads as a bad key.
    """

    def __init__(self, keys: KeyStore, *, lookup_timeout_s: float = LOOKUP_TIMEOUT_S) -> None:
        self.keys = keys
        self.lookup_timeout_s = lookup_timeout_s
        self._touched: dict[str, float] = {}
        self._refused: collections.OrderedDict[str, float] = collections.OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        if not KEY_PATTERN.fullmatch(token):
            return None
        digest = secret_digest(token)
        if self._refused_recently(digest):
            return None
        key = await self.bounded(self.keys.key_by_hash, digest)
        if key is None or key.revoked_at is not None:
            self._remember_refused(digest)
            return None
        await self._touch(key)
        caller = Caller.of(key)
        return LoreAccessToken(token=token, client_id=key.id, scopes=[], caller=caller)

    async def bounded(self, lookup: Any, *args: Any) -> Any:
        """``lookup`` on a worker thread, as ``KeyLookupUnavailable`` if it fails or overruns.

        The thread is abandoned at the deadline rather than waited for: a database that
        stopped answering must not hold the request (``stores.postgres.hang`` frees the thread).
        """
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

    def _refused_recently(self, digest: str) -> bool:
        until = self._refused.get(digest)
        if until is None:
            return False
        if until > time.monotonic():
            return True
        del self._refused[digest]
        return False

    def _remember_refused(self, digest: str) -> None:
        self._refused[digest] = time.monotonic() + NEGATIVE_TTL_S
        self._refused.move_to_end(digest)
        while len(self._refused) > NEGATIVE_CACHE_MAX:
            self._refused.popitem(last=False)

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
