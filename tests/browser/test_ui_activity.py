"""The page's activity views in a real browser: the timeline of what was done (tool
``recent_activity``), a lesson's recalls, and a key for one project seeing nothing of another's
log. They need the activity log in the server (group ``activity``); a build without it skips
them, saying so. Browser and screenshots as ``test_ui``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.tools.registry import TOOL_GROUPS
from stores import open_local_store
from tests.browser import test_ui as ui
from tests.support.helpers import call
from tests.support.team import TeamServer, team_server

pytestmark = pytest.mark.process

# test_ui's fixtures: the browser (or a skip, a failure under CI=true) and the screenshots' folder.
driver = ui.driver
screenshots = ui.screenshots
GROUPS = ("lessons", "structured", "history", "activity")


@pytest.fixture
def logged(tmp_path: Path, embedder: Embedder) -> Iterator[TeamServer]:
    """A team server over SQLite serving the activity group (off by default)."""
    if "activity" not in TOOL_GROUPS:
        pytest.skip("this build has no activity log (tool group activity, recent_activity)")
    store = open_local_store(tmp_path / "ui.db")
    try:
        with team_server(store, embedder, tools=GROUPS) as server:
            yield server
    finally:
        store.close()


def test_the_timeline_shows_what_was_done_filtered_by_kind(
    driver: Any, logged: TeamServer, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By

    key = logged.keys.init_org("local").key
    saved = ui.mcp(
        logged,
        key,
        lambda c: call(c, "save_lesson", problem="Cache stampede at midnight", resolution="Jitter the TTLs."),
    )
    ui.mcp(logged, key, lambda c: call(c, "recall_lessons", query="cache stampede"))
    ui.mcp(
        logged, key, lambda c: call(c, "update_lesson", id=saved["id"], resolution="Jitter the TTLs by 10%.")
    )
    ui.open_page(driver, logged, key, "activity")
    kinds = [e.get_attribute("data-kind") for e in driver.find_elements(By.CSS_SELECTOR, "#activity > li")]
    assert kinds[:3] == ["update", "recall", "save"], kinds
    assert "cache stampede" in ui.text_of(driver, "activity")
    ui.snap(driver, screenshots, "activity")

    driver.find_element(By.ID, "activity-kind").send_keys("update")
    driver.find_element(By.CSS_SELECTOR, "form[aria-label='Filter activity'] button").click()
    ui.wait_for(driver, lambda d: "kind=update" in str(ui.shown(d)), "the filtered timeline")
    assert [
        e.get_attribute("data-kind") for e in driver.find_elements(By.CSS_SELECTOR, "#activity > li")
    ] == ["update"]

    ui.open_page(driver, logged, key, f"lesson/{saved['id']}")
    assert ui.text_of(driver, "recalls").startswith("Recalled 1 times")
    ui.open_page(driver, logged, key, "overview")
    assert "Cache stampede at midnight" in ui.text_of(driver, "most-recalled")
    assert ui.text_of(driver, "stale").endswith("None."), "a lesson saved today is not stale"


def test_a_key_for_one_project_sees_nothing_of_anothers_activity(driver: Any, logged: TeamServer) -> None:
    root = logged.keys.init_org("local").key
    ui.mcp(
        logged,
        root,
        lambda c: call(c, "save_lesson", problem="Alpha thing", resolution="A.", project="alpha"),
    )
    ui.mcp(
        logged, root, lambda c: call(c, "save_lesson", problem="Beta thing", resolution="B.", project="beta")
    )
    ui.mcp(logged, root, lambda c: call(c, "recall_lessons", query="beta thing", project="beta"))
    alpha = logged.keys.create_key("local", name="alpha-only", project="alpha", root=False).key
    ui.open_page(driver, logged, alpha, "activity")
    assert "Beta" not in ui.text_of(driver, "view") and "beta thing" not in ui.text_of(driver, "view")
    assert ui.text_of(driver, "activity"), "the alpha key sees its own project's log"
    ui.open_page(driver, logged, alpha, "activity?kind=recall")
    assert "beta" not in driver.page_source


def test_a_person_sees_what_reached_the_agents_unasked(
    driver: Any, tmp_path: Path, embedder: Embedder
) -> None:
    """Issue 33: injections and asks to save are in the timeline, with their session and bytes,
    and the kind filter finds them."""
    from selenium.webdriver.common.by import By

    store = open_local_store(tmp_path / "loop.db")
    try:
        with team_server(store, embedder, tools=(*GROUPS, "loop")) as server:
            key = server.keys.init_org("local").key
            saved = ui.mcp(
                server,
                key,
                lambda c: call(c, "save_lesson", problem="Flaky DNS in CI", resolution="Pin resolv.conf."),
            )
            given = ui.mcp(server, key, lambda c: call(c, "session_context", session_id="sess-42"))
            ui.mcp(
                server,
                key,
                lambda c: call(c, "ask_to_save", session_id="sess-42", signal="`pytest` failed, then passed"),
            )
            ui.open_page(driver, server, key, "activity")
            kinds = [
                e.get_attribute("data-kind") for e in driver.find_elements(By.CSS_SELECTOR, "#activity > li")
            ]
            assert kinds[:2] == ["ask", "inject"], kinds
            text = ui.text_of(driver, "activity")
            size = len(given["hookSpecificOutput"]["additionalContext"].encode())
            assert "session sess-42" in text and f"{size} bytes" in text
            injected = f"#activity [data-kind='inject'] a[href='#/lesson/{saved['id']}']"
            assert driver.find_element(By.CSS_SELECTOR, injected).text == "Flaky DNS in CI"
            driver.find_element(By.ID, "activity-kind").send_keys("inject")
            driver.find_element(By.CSS_SELECTOR, "form[aria-label='Filter activity'] button").click()
            ui.wait_for(driver, lambda d: "kind=inject" in str(ui.shown(d)), "the filtered timeline")
            shown = [
                e.get_attribute("data-kind") for e in driver.find_elements(By.CSS_SELECTOR, "#activity > li")
            ]
            assert shown == ["inject"]
    finally:
        store.close()
