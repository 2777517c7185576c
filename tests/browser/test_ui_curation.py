"""Curating in the page, in a real browser (issue 35): the page's search is no agent's recall,
a merge is one commit keeping both lessons' votes, an edit reverts after a vote, a pair at 0.9
among 2,000 lessons comes first and "keep both" is stored; and using the page from the keyboard.
Browser and helpers as ``test_ui``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.keys import KeyService
from stores import Scope, open_local_store
from stores.engine.lessons import LessonDraft
from tests.browser import test_ui as ui
from tests.mcp.test_curation import at_cosine
from tests.support.helpers import call, vector
from tests.support.team import TeamServer, team_server

pytestmark = pytest.mark.process

# test_ui's browser fixture (or a skip, a failure under CI=true).
driver = ui.driver


# Every group the page has a view for, as ``lore-memory ui`` serves them.
PAGE_GROUPS = ("lessons", "structured", "history", "activity", "curation", "loop")


@pytest.fixture
def local_lore(tmp_path: Path, embedder: Embedder) -> Iterator[TeamServer]:
    store = open_local_store(tmp_path / "ui.db")
    try:
        with team_server(store, embedder, tools=PAGE_GROUPS) as server:
            yield server
    finally:
        store.close()


@dataclass
class Curating:
    """A team server whose page key is a person's (as ``lore-memory ui``'s is), and an agent's key."""

    server: TeamServer
    page: str
    agent: str
    store: Any


@pytest.fixture
def curating(tmp_path: Path, embedder: Embedder) -> Iterator[Curating]:
    store = open_local_store(tmp_path / "ui.db")
    keys = KeyService(store.keys)
    page = keys.init_org("local")
    agent = keys.create_key("local", name="agent", project=None, root=True)
    try:
        with team_server(store, embedder, tools=PAGE_GROUPS, people={page.id}) as server:
            yield Curating(server, page.key, agent.key, store)
    finally:
        store.close()


def test_merge_is_one_commit_keeping_votes_and_the_pages_search_is_no_recall(
    driver: Any, curating: Curating
) -> None:
    from selenium.webdriver.common.by import By

    lore, agent = curating.server, curating.agent

    async def seed(c: Any) -> list[dict[str, Any]]:
        saved = [
            await call(c, "save_lesson", problem=p, resolution=r, tags=t)
            for p, r, t in (
                (
                    "numpy 2 breaks the wheel build",
                    "Pin numpy<2 until the C extension is rebuilt.",
                    ["build"],
                ),
                (
                    "numpy 2.0 breaks building the wheel",
                    "Rebuild the extension against numpy 2 headers.",
                    ["python"],
                ),
            )
        ]
        await call(c, "upvote_lesson", id=saved[0]["id"])
        for _ in range(4):
            await call(c, "upvote_lesson", id=saved[1]["id"])
        await call(c, "recall_lessons", query="numpy wheel build", limit=2)
        return saved

    first, second = (lesson["id"] for lesson in ui.mcp(lore, agent, seed))
    recalls = ui.mcp(lore, agent, lambda c: c.read_resource(f"lore://lessons/{first}"))
    before = json.loads(recalls.contents[0].text)["recalls"]
    ui.open_page(driver, lore, curating.page, "lessons?q=numpy%20wheel")
    ui.wait_for(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"a[href='#/lesson/{first}']"), "the search"
    )
    after = json.loads(
        ui.mcp(lore, agent, lambda c: c.read_resource(f"lore://lessons/{first}")).contents[0].text
    )
    assert after["recalls"] == before == 1  # the person's search is no agent's recall

    commits = len(ui.mcp(lore, agent, lambda c: call(c, "history", limit=100))["commits"])
    ui.show(driver, "duplicates")
    pair = ui.wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".dup"), "the pair")[0]
    kept_card = pair.find_element(By.XPATH, f".//article[.//a[@href='#/lesson/{first}']]")
    kept_card.find_element(By.XPATH, ".//button[text()='Merge the other into this']").click()
    ui.accept(driver)
    ui.wait_for(driver, lambda d: ui.text_of(d, "notice").startswith("Merged in one commit"), "the merge")
    kept = ui.mcp(lore, agent, lambda c: call(c, "get_lesson", id=first))
    assert (kept["upvotes"], sorted(kept["tags"])) == (5, ["build", "python"])
    history = ui.mcp(lore, agent, lambda c: call(c, "history", limit=100))["commits"]
    assert len(history) == commits + 1 and history[0]["kind"] == "merge"
    gone = ui.mcp(lore, agent, lambda c: c.call_tool("get_lesson", {"id": second}))
    assert gone.is_error and gone.content[0].text.startswith("NOT_FOUND: ")


def test_reverting_an_edit_after_a_vote_works_from_the_lesson_page(driver: Any, curating: Curating) -> None:
    from selenium.webdriver.common.by import By

    lore, agent = curating.server, curating.agent

    async def seed(c: Any) -> str:
        saved = await call(
            c, "save_lesson", problem="Redis evicts keys early", resolution="Set maxmemory-policy"
        )
        await call(c, "update_lesson", id=saved["id"], resolution="A bad edit")
        await call(c, "upvote_lesson", id=saved["id"])
        return str(saved["id"])

    lesson = ui.mcp(lore, agent, seed)
    ui.open_page(driver, lore, curating.page, f"lesson/{lesson}")
    card = ui.wait_for(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".commit[data-kind='update']"), "the edit"
    )
    card[0].find_element(By.CSS_SELECTOR, "button.revert").click()
    ui.accept(driver)
    ui.wait_for(driver, lambda d: ui.text_of(d, "notice").startswith("Reverted"), "the revert")
    got = ui.mcp(lore, agent, lambda c: call(c, "get_lesson", id=lesson))
    assert (got["resolution"], got["upvotes"]) == ("Set maxmemory-policy", 1)


def test_a_pair_at_090_among_2000_lessons_is_listed_first_and_kept_apart(
    driver: Any, curating: Curating
) -> None:
    from selenium.webdriver.common.by import By

    base = vector("webhooks")
    items = [
        (LessonDraft(f"lesson {n} about topic {n}", f"fix number {n}"), vector(f"v{n}")) for n in range(1998)
    ]
    items += [
        (LessonDraft("Stripe webhook signature fails", "Verify the raw body"), base),
        (LessonDraft("Webhook signatures never match", "Sign the unparsed body"), at_cosine(base, 0.9, "s")),
    ]
    curating.store.save_many(Scope(org="local", project="default"), items)
    ui.open_page(driver, curating.server, curating.page, "duplicates")
    pair = ui.wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".dup"), "the pairs")[0]
    assert "Stripe webhook signature fails" in pair.text and "Similarity 0.900" in pair.text
    pair.find_element(By.XPATH, ".//button[text()='Keep both']").click()
    ui.wait_for(driver, lambda d: d.find_elements(By.ID, "no-duplicates"), "the pair kept apart")
    again = ui.mcp(curating.server, curating.agent, lambda c: call(c, "find_duplicates"))
    assert again["total"] == 0  # stored on the server: every curator sees it


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
