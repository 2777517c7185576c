"""The settings of replicas without affinity: ``LORE_STATELESS_HTTP`` and
``LORE_REQUEST_STATE_SECRET`` (its key ring, its length, and that it never shows)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lore_mcp.settings import Settings

OLD, NEW = "o" * 32, "n" * 40


def test_unset_the_ring_is_empty_and_sessions_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LORE_REQUEST_STATE_SECRET", raising=False)
    monkeypatch.delenv("LORE_STATELESS_HTTP", raising=False)
    settings = Settings()
    assert settings.request_state_keys == () and settings.stateless_http is False
    assert Settings(request_state_secret="  ").request_state_keys == ()


def test_the_secret_is_a_ring_the_first_key_seals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LORE_REQUEST_STATE_SECRET", f" {NEW} , {OLD},")
    monkeypatch.setenv("LORE_STATELESS_HTTP", "true")
    settings = Settings()
    assert settings.request_state_keys == (NEW, OLD) and settings.stateless_http is True
    assert NEW not in repr(settings) and OLD not in str(settings.model_dump())


def test_every_key_of_the_ring_needs_32_characters() -> None:
    with pytest.raises(ValidationError, match="at least 32 characters") as refused:
        Settings(request_state_secret=f"{NEW},short")
    assert NEW not in str(refused.value) and "short" not in str(refused.value)
