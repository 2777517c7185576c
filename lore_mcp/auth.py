"""API keys and who is calling.

A key is ``lore_sk_`` + 32 random alphanumerics; only its SHA-256 is stored, so a leaked database leaks no
key. Over HTTP ``key_tokens.ApiKeyVerifier`` checks each request and tools read the caller from its token;
over stdio the local user is trusted. An unknown or revoked key is refused (401); an unanswerable lookup
raises ``KeyLookupUnavailable`` (503, ``UNAVAILABLE``): an outage is not a bad key."""

from __future__ import annotations

import hashlib
import re
import secrets
import string
from dataclasses import dataclass

from lore_mcp.errors import FORBIDDEN, UNAVAILABLE, LoreError
from stores import ApiKey

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
# An unknown or revoked key is refused without asking again for this long: keys are 190 random bits, so no
# later key was refused, and revocation is never undone. The bound keeps memory flat against guessers.
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
    # A person on Lore's page, known from the credential (never a client-given name): a token of the
    # page's OAuth client, or the ``lore-memory ui`` run's key.
    person: bool = False

    @classmethod
    def of(cls, key: ApiKey, *, person: bool = False) -> Caller:
        return cls(key.id, key.org, key.name, key.project, key.root, person)

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
