"""Signed, expiring values the consent page round-trips (the pending request, the approved-key cookie):
itsdangerous HMAC-SHA1, a key per purpose, one secret in the store, so every replica accepts another's; a
value altered or past its age is refused.
"""

from __future__ import annotations

from typing import Any

from itsdangerous import BadData, URLSafeTimedSerializer

# How long a person has to answer the consent page.
REQUEST_MAX_AGE_S = 10 * 60
# How long a browser remembers the key it approved with.
REMEMBER_MAX_AGE_S = 30 * 24 * 3600


class Signer:
    """One serializer per purpose, so a value signed for one is never accepted as another."""

    def __init__(self, secret: str) -> None:
        self._request = URLSafeTimedSerializer(secret, salt="lore-oauth-request")
        self._remember = URLSafeTimedSerializer(secret, salt="lore-oauth-remember")

    def request(self, value: dict[str, Any]) -> str:
        return self._request.dumps(value)

    def load_request(self, signed: str) -> dict[str, Any] | None:
        return _load(self._request, signed, REQUEST_MAX_AGE_S)

    def remember(self, value: dict[str, Any]) -> str:
        return self._remember.dumps(value)

    def load_remember(self, signed: str) -> dict[str, Any] | None:
        return _load(self._remember, signed, REMEMBER_MAX_AGE_S)


def _load(serializer: URLSafeTimedSerializer, signed: str, max_age: int) -> dict[str, Any] | None:
    try:
        value = serializer.loads(signed, max_age=max_age)
    except BadData:
        return None
    return value if isinstance(value, dict) else None
