"""The composition root (``lore_mcp.app``): what it opens, what it builds, and when."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lore_mcp.app import App, open_app, open_store
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.settings import Settings
from lore_mcp.tools.registry import ADMIN_TOOLS
from tests.support.clients import connected


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A local store in ``tmp_path``, whatever LORE_* the shell running the tests has set."""
    for name in [n for n in os.environ if n.startswith("LORE_")]:
        monkeypatch.delenv(name)
    return Settings(db_path=tmp_path / "lore.db", org="acme", project="alpha", tools="lessons")


@pytest.fixture
def app(settings: Settings) -> Iterator[App]:
    with open_app(settings) as opened:
        yield opened


def test_key_administration_builds_no_embedder(app: App) -> None:
    created = app.keys.init_org("acme")
    assert [k.id for k in app.keys.list_keys("acme")] == [created.id]
    org = app.health()
    assert org is not None and org.id == "acme"
    assert "embedder" not in vars(app) and "lessons" not in vars(app)


def test_the_services_share_one_lesson_service_on_the_settings_org_and_project(
    settings: Settings, embedder: Embedder
) -> None:
    with App(settings, open_store(settings), embedder=embedder) as app:
        assert app.embedder is embedder
        assert app.lessons.org == "acme" and app.lessons.default_project == "alpha"
        assert app.transfer.lessons is app.lessons and app.structured.lessons is app.lessons
        services = app.server(with_keys=True).services
        assert services is not None and services.keys is app.keys


async def test_the_server_serves_the_settings_tool_groups(settings: Settings, embedder: Embedder) -> None:
    for tools, admin in (("lessons", False), ("lessons,admin", True)):
        chosen = settings.model_copy(update={"tools": tools})
        with App(chosen, open_store(chosen), embedder=embedder) as app:
            async with connected(app.server(with_keys=admin)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
        assert "recall_lessons" in names and "apply" not in names
        assert ADMIN_TOOLS.issubset(names) is admin


def test_a_store_the_settings_cannot_open_here_is_refused_with_a_sentence(settings: Settings) -> None:
    with pytest.raises(SystemExit, match="LORE_DATABASE_URL"):
        open_store(settings.model_copy(update={"store": "postgres", "database_url": None}))
    with pytest.raises(SystemExit, match="forwards to a team server"):
        open_store(settings.model_copy(update={"store": "remote"}))
