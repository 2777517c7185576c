"""Curating in the page, in a real browser: merging near-duplicates (an update and a delete,
each revertible from its commit's page) and using the page from the keyboard. Browser and
helpers as ``test_ui``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lore_mcp.embedding.embedder import Embedder
from stores import open_local_store
from tests.browser import test_ui as ui
from tests.support.helpers import call
from tests.support.team import TeamServer, team_server

pytestmark = pytest.mark.process

# test_ui's browser fixture (or a skip, a failure under CI=true).
driver = ui.driver


@pytest.fixture
def local_lore(tmp_path: Path, embedder: Embedder) -> Iterator[TeamServer]:
    store = open_local_store(tmp_path / "ui.db")
    try:
        with team_server(store, embedder) as server:
            yield server
    finally:
        store.close()


def test_merging_near_duplicates_is_an_update_and_a_delete_each_revertible(
    driver: Any, local_lore: TeamServer
) -> None:
    from selenium.webdriver.common.by import By

    key = local_lore.keys.init_org("local").key
    saved = [
        ui.mcp(
            local_lore, key, lambda c, p=p, r=r, t=t: call(c, "save_lesson", problem=p, resolution=r, tags=t)
        )
        for p, r, t in (
            ("numpy 2 breaks the wheel build", "Pin numpy<2 until the C extension is rebuilt.", ["build"]),
            (
                "numpy 2.0 breaks building the wheel",
                "Rebuild the extension against numpy 2 headers.",
                ["python"],
            ),
        )
    ]
    first, second = (lesson["id"] for lesson in saved)
    ui.open_page(driver, local_lore, key, "duplicates")
    pair = ui.wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".dup"), "the pair")[0]
    kept_card = pair.find_element(By.XPATH, f".//article[.//a[@href='#/lesson/{first}']]")
    kept_card.find_element(By.XPATH, ".//button[text()='Merge the other into this']").click()
    ui.accept(driver)
    ui.wait_for(driver, lambda d: ui.text_of(d, "notice").startswith("Merged."), "the merge")
    assert driver.find_elements(By.ID, "no-duplicates")

    kept = ui.mcp(local_lore, key, lambda c: call(c, "get_lesson", id=first))
    assert sorted(kept["tags"]) == ["build", "python"]
    assert "Pin numpy<2" in kept["resolution"] and "numpy 2 headers" in kept["resolution"]
    gone = ui.mcp(local_lore, key, lambda c: c.call_tool("get_lesson", {"id": second}))
    assert gone.is_error and gone.content[0].text.startswith("NOT_FOUND: ")

    # Undo the delete from its commit's page: the merged-away lesson is back.
    ui.show(driver, "history")
    delete = driver.find_element(By.CSS_SELECTOR, "#commits tr[data-kind='delete'] a")
    delete.click()
    ui.wait_for(
        driver, lambda d: ui.shown(d) and str(ui.shown(d)).startswith("#/commit/"), "the delete commit"
    )
    driver.find_element(By.CSS_SELECTOR, "button.revert").click()
    ui.accept(driver)
    ui.wait_for(driver, lambda d: ui.text_of(d, "notice").startswith("Reverted"), "the revert of the delete")
    back = ui.mcp(local_lore, key, lambda c: call(c, "get_lesson", id=second))
    assert back["problem"] == "numpy 2.0 breaks building the wheel"


def test_the_page_works_from_the_keyboard(driver: Any, local_lore: TeamServer) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    key = local_lore.keys.init_org("local").key
    saved = ui.mcp(
        local_lore,
        key,
        lambda c: call(c, "save_lesson", problem="Keyboard only", resolution="Tab and Enter."),
    )
    ui.open_page(driver, local_lore, key, "lessons")
    # A new view takes the focus to its heading, so the next Tab starts there, not at the top.
    assert driver.switch_to.active_element.text == "Lessons, newest first"
    link = driver.find_element(By.CSS_SELECTOR, f"[data-id='{saved['id']}'] a.problem")
    driver.execute_script("arguments[0].focus()", link)
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    ui.wait_for(driver, lambda d: ui.shown(d) == f"#/lesson/{saved['id']}", "the lesson opened with Enter")
    assert driver.switch_to.active_element.text == "Lesson"
    driver.switch_to.active_element.send_keys(Keys.TAB)
    assert driver.switch_to.active_element.tag_name in ("a", "button", "input", "textarea")
