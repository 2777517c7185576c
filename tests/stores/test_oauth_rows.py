"""The OAuth rows (``stores.engine.oauth_rows``) on both backends: clients, codes used once,
tokens rotated once, families revoked on a replay, one shared secret, expired rows pruned."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

from stores.engine.oauth_rows import OAuthCode, OAuthGrant, OAuthStore, OAuthTokenRow


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def grant(store, org: str = "acme") -> OAuthGrant:
    if store.keys.get_org(org) is None:
        store.keys.create_org(org, org)
    key = store.keys.add_key(
        org, name="k", key_hash=digest(org + "k"), prefix="lore_sk_k", project=None, root=False
    )
    return OAuthGrant(
        client_id="c1", org=org, key_id=key.id, project="alpha", resource="https://lore.test/mcp", scopes=()
    )


def later() -> datetime:
    """Five minutes from now, taken when a row is made: a suite runs longer than five minutes."""
    return datetime.now(UTC) + timedelta(minutes=5)


def token(family: str, g: OAuthGrant, kind: str = "access", expires: datetime | None = None) -> OAuthTokenRow:
    return OAuthTokenRow(kind=kind, family=family, grant=g, expires_at=expires or later(), revoked=False)


def test_a_client_is_stored_and_replaced(store) -> None:
    oauth: OAuthStore = store.keys.oauth
    assert oauth.client("c1") is None
    oauth.save_client("c1", {"client_name": "<b>One</b>", "redirect_uris": ["http://127.0.0.1/cb"]})
    oauth.save_client("c1", {"client_name": "Two", "redirect_uris": ["http://127.0.0.1/cb"]})
    assert oauth.client("c1") == {"client_name": "Two", "redirect_uris": ["http://127.0.0.1/cb"]}


def test_a_code_is_used_once_and_a_replay_revokes_its_tokens(store) -> None:
    oauth: OAuthStore = store.keys.oauth
    g = grant(store)
    code = OAuthCode(
        grant=g,
        redirect_uri="http://127.0.0.1:5/cb",
        redirect_uri_explicit=True,
        code_challenge="abc",
        expires_at=later(),
        used=False,
    )
    oauth.add_code(digest("code"), code)
    assert oauth.code(digest("code")) == code
    assert oauth.code(digest("other")) is None
    assert oauth.use_code(digest("code"))
    assert oauth.code(digest("code")).used  # type: ignore[union-attr]
    issued = token(digest("code"), g)
    oauth.add_token(digest("at"), issued)
    assert oauth.token(digest("at")) == issued
    assert not oauth.use_code(digest("code"))
    assert oauth.token(digest("at")).revoked  # type: ignore[union-attr]


def test_a_refresh_token_rotates_once_and_a_replay_revokes_the_family(store) -> None:
    oauth: OAuthStore = store.keys.oauth
    g = grant(store)
    oauth.add_token(digest("rt1"), token("fam", g, "refresh"))
    oauth.add_token(digest("at2"), token("fam", g))
    oauth.add_token(digest("other"), token("fam2", g))
    assert oauth.use_refresh(digest("rt1"))
    assert not oauth.token(digest("at2")).revoked  # type: ignore[union-attr]
    assert not oauth.use_refresh(digest("rt1"))
    assert oauth.token(digest("at2")).revoked  # type: ignore[union-attr]
    assert not oauth.token(digest("other")).revoked  # type: ignore[union-attr]
    assert not oauth.use_refresh(digest("at2")), "an access token is never exchanged"


def test_the_secret_is_made_once(store) -> None:
    oauth: OAuthStore = store.keys.oauth
    name = f"test-{uuid.uuid4()}"  # the Postgres of a test session keeps its rows
    assert oauth.secret(name, "first") == "first"
    assert oauth.secret(name, "second") == "first"


def test_expired_rows_are_pruned_and_keys_are_found_by_id(store) -> None:
    oauth: OAuthStore = store.keys.oauth
    g = grant(store)
    oauth.add_token(digest("old"), token("f", g, expires=datetime.now(UTC) - timedelta(seconds=1)))
    oauth.add_token(digest("new"), token("f", g))
    oauth.prune(datetime.now(UTC))
    assert oauth.token(digest("old")) is None and oauth.token(digest("new")) is not None
    assert store.keys.key_by_id("acme", g.key_id).name == "k"  # type: ignore[union-attr]
    assert store.keys.key_by_id("other", g.key_id) is None


def test_unused_clients_are_capped_per_address_and_forgotten_after_a_day(store) -> None:
    oauth: OAuthStore = store.keys.oauth
    day, start = timedelta(hours=24), datetime.now(UTC)
    first, second, third, fourth = (f"reg-{uuid.uuid4()}" for _ in range(4))
    meta = {"redirect_uris": ["http://127.0.0.1/cb"]}
    assert oauth.register_client(first, meta, "198.51.100.7", start, 2, day) is None
    assert oauth.register_client(second, meta, "198.51.100.7", start + timedelta(hours=1), 2, day) is None
    # The address is full until its oldest unused client expires; nothing is stored meanwhile.
    wait = oauth.register_client(third, meta, "198.51.100.7", start + timedelta(hours=2), 2, day)
    assert wait == 22 * 3600 and oauth.client(third) is None
    assert oauth.register_client(third, meta, "203.0.113.9", start + timedelta(hours=2), 2, day) is None
    # A client that got a token is in use: not counted, never forgotten.
    oauth.add_token(
        digest(second), token(second, OAuthGrant(**{**grant(store).__dict__, "client_id": second}))
    )
    assert (
        oauth.register_client(fourth, meta, "198.51.100.7", start + day + timedelta(seconds=1), 2, day)
        is None
    )
    assert oauth.client(first) is None, "unused for a day: deleted"
    assert oauth.client(second) == meta and oauth.client(third) == meta and oauth.client(fourth) == meta
