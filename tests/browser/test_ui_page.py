"""The page's look and readability in a real browser (issue 35): edits that save, an Edit
button that opens and closes its form, lessons and commits named in words, phone layouts
without mid-word breaks, a dark theme, and axe-core finding no violation of any impact on any
view, in either theme.

One browser and one seeded server (SQLite: what is checked here is the page, not the backend)
for the whole module, so the many views stay quick. axe-core is a vendored test asset
(``assets/axe.min.js``, MPL-2.0), injected into the page through WebDriver. Screenshots of the
main views at 1280x800 and 390x844 in both themes go to ``LORE_UI_SCREENSHOTS`` (docs/ui.md's
come from ``docs/screenshots``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lore_mcp.embedding.embedder import Embedder
from stores import open_local_store
from tests.browser import test_ui as ui
from tests.browser.test_consent_page import chromium
from tests.support.helpers import call
from tests.support.team import TeamServer, team_server

pytestmark = pytest.mark.process

AXE = Path(__file__).parent / "assets" / "axe.min.js"
GROUPS = ("lessons", "structured", "history", "activity")
LONG_PROBLEM = "Integration tests against the staging database time out when the connection pool is exhausted"
WIDE, PHONE = (1280, 800), (390, 844)
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


@dataclass
class Seeded:
    server: TeamServer
    key: str
    lesson: str  # confidence 0.86, voted on and edited
    update: str  # the commit of its edit


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chromium()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Seeded]:
    store = open_local_store(tmp_path_factory.mktemp("page") / "ui.db")
    try:
        with team_server(store, embedder, tools=GROUPS) as server:
            key = server.keys.init_org("local").key
            ui.import_examples(lambda work: ui.mcp(server, key, work))

            async def work(client: Any) -> tuple[str, str]:
                saved = await call(
                    client,
                    "save_lesson",
                    problem=LONG_PROBLEM,
                    resolution="Raise the pool size to 20 and close sessions in teardown.",
                    tags=["ci", "postgres"],
                    confidence=0.86,
                )
                await call(client, "upvote_lesson", id=saved["id"])
                await call(client, "update_lesson", id=saved["id"], resolution="Raise the pool size to 20.")
                await call(client, "recall_lessons", query="staging database timeouts")
                history = await call(client, "history", target=saved["id"], limit=1)
                return saved["id"], history["commits"][0]["id"]

            lesson, update = ui.mcp(server, key, work)
            yield Seeded(server, key, lesson, update)
    finally:
        store.close()


@pytest.fixture
def page(browser: Any, seeded: Seeded) -> Any:
    """The browser signed in, at 1280x800 in the light theme."""
    theme(browser, "light")
    browser.set_window_size(*WIDE)
    if (
        not browser.find_elements("css selector", "#app")
        or not browser.find_element("id", "app").is_displayed()
    ):
        ui.open_page(browser, seeded.server, seeded.key)
    return browser


def theme(driver: Any, scheme: str) -> None:
    """What `prefers-color-scheme` answers in the page, as a system setting would."""
    features = [{"name": "prefers-color-scheme", "value": scheme}]
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})


def axe_violations(driver: Any) -> list[dict[str, Any]]:
    if not driver.execute_script("return Boolean(window.axe)"):
        driver.execute_script(AXE.read_text())
    driver.set_script_timeout(60)
    script = """
        const done = arguments[arguments.length - 1];
        axe.run(document, { resultTypes: ["violations"] }).then(
            (r) => done(r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }))),
            (e) => done([{ id: "axe failed", impact: String(e), nodes: [] }]),
        );
    """
    return list(driver.execute_async_script(script))


def views(seeded: Seeded) -> list[str]:
    return [
        "overview",
        "search?q=staging%20database",
        "lessons",
        f"lesson/{seeded.lesson}",
        "duplicates",
        "tables",
        "tables/flaky_tests",
        "history",
        f"commit/{seeded.update}",
        "activity",
    ]


VIEW_NAMES = [
    "overview",
    "search",
    "lessons",
    "lesson",
    "duplicates",
    "tables",
    "table",
    "history",
    "commit",
    "activity",
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", VIEW_NAMES)
def test_axe_finds_no_violation_on_the_view(page: Any, seeded: Seeded, name: str, scheme: str) -> None:
    theme(page, scheme)
    ui.show(page, views(seeded)[VIEW_NAMES.index(name)])
    assert axe_violations(page) == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_signing_in_axe_finds_nothing_and_a_wrong_key_gets_a_short_sentence(
    page: Any, seeded: Seeded, scheme: str
) -> None:
    theme(page, scheme)
    page.find_element("id", "signout").click()
    field = ui.wait_for(page, lambda d: d.find_element("id", "api-key").is_displayed(), "the sign-in form")
    assert field and axe_violations(page) == []
    page.find_element("id", "api-key").send_keys("lore_sk_" + "x" * 32)
    page.find_element("id", "signin-button").click()
    ui.wait_for(page, lambda d: ui.text_of(d, "error").startswith("UNAUTHORIZED: "), "the refusal")
    assert len(ui.text_of(page, "error")) < 100, ui.text_of(page, "error")
    field = page.find_element("id", "api-key")
    field.clear()
    field.send_keys(seeded.key)
    page.find_element("id", "signin-button").click()
    ui.wait_for(page, lambda d: d.find_element("id", "app").is_displayed(), "signed in again")


def test_edit_opens_and_closes_its_form(page: Any, seeded: Seeded) -> None:
    ui.show(page, f"lesson/{seeded.lesson}")
    form = page.find_element("css selector", "form.edit")
    assert not form.is_displayed(), "the form shows before Edit is pressed"
    page.find_element("id", "edit").click()
    assert form.is_displayed()
    page.find_element("id", "edit").click()
    assert not form.is_displayed()


def test_an_edit_of_a_lesson_with_confidence_0_86_saves_by_clicks(page: Any, seeded: Seeded) -> None:
    ui.show(page, f"lesson/{seeded.lesson}")
    if not page.find_element("css selector", "form.edit").is_displayed():
        page.find_element("id", "edit").click()
    assert page.find_element("id", "edit-confidence").get_attribute("value") == "0.86"
    context = page.find_element("id", "edit-context")
    context.clear()
    context.send_keys("Seen on the nightly staging run.")
    page.find_element("id", "save-edit").click()
    ui.accept(page)
    ui.wait_for(
        page, lambda d: ui.text_of(d, "field-context") == "Seen on the nightly staging run.", "the save"
    )
    lesson = ui.mcp(seeded.server, seeded.key, lambda c: call(c, "get_lesson", id=seeded.lesson))
    assert lesson["context"] == "Seen on the nightly staging run." and lesson["confidence"] == 0.86


def test_lessons_and_commits_are_named_in_words(page: Any, seeded: Seeded) -> None:
    ui.show(page, "history")
    changes = [cell.text for cell in page.find_elements("css selector", "#commits tbody td:nth-child(2)")]
    assert f"vote ▲ on “{LONG_PROBLEM[:60].rsplit(' ', 1)[0]}…”" in changes, changes
    assert any(
        text.startswith("edit of “Integration tests") and text.endswith(": resolution") for text in changes
    )
    ui.show(page, f"commit/{seeded.update}")
    heading = page.find_element("css selector", "#view h3").text
    assert heading.startswith("#") and heading.count("edit") == 1 and "update" not in heading, heading
    fields = [row.get_attribute("data-field") for row in page.find_elements("css selector", "tr[data-field]")]
    assert fields == ["resolution"], "a diff shows only what changed"
    ui.show(page, "activity")
    links = page.find_elements("css selector", "#activity a[href^='#/lesson/']")
    assert links and not [link.text for link in links if ULID.search(link.text)]
    assert any(link.text.startswith("Integration tests against the staging") for link in links)


def test_plots_are_body_text_that_link_to_their_lessons(page: Any, seeded: Seeded) -> None:
    ui.show(page, "overview")
    body = page.execute_script("return getComputedStyle(document.body).fontSize")
    labels = page.find_elements("css selector", "#view .bars a.label")
    assert labels and all(label.value_of_css_property("font-size") == body for label in labels)
    assert LONG_PROBLEM in [label.text for label in labels], "a label is cut"
    link = next(label for label in labels if label.text == LONG_PROBLEM)
    assert link.get_attribute("href").endswith(f"#/lesson/{seeded.lesson}")


def test_count_cards_sit_four_in_a_row_or_two_by_two(page: Any, seeded: Seeded) -> None:
    for size, rows in ((WIDE, 1), (PHONE, 2)):
        page.set_window_size(*size)
        ui.show(page, "overview")
        tops = page.execute_script(
            "return [...document.querySelectorAll('#counts > *')].map((e) => e.getBoundingClientRect().top)"
        )
        assert len(tops) == 4 and len(set(tops)) == rows, (size, tops)


def test_a_chosen_project_shows_all_its_counts_and_an_unknown_one_is_refused(
    page: Any, seeded: Seeded
) -> None:
    project = page.find_element("id", "project")
    project.clear()
    project.send_keys("nosuchproject")
    project.submit()
    ui.wait_for(page, lambda d: ui.text_of(d, "error").startswith("NOT_FOUND: "), "the refusal")
    assert page.execute_script("return sessionStorage.getItem('lore.project')") in (None, "")
    project.clear()
    project.send_keys("default")
    project.submit()
    ui.wait_for(page, lambda d: ui.text_of(d, "notice") == "Showing project default.", "the switch")
    ui.show(page, "overview")
    counts = ui.text_of(page, "counts")
    try:
        assert all(word in counts for word in ("lessons", "tables", "rows", "commits")), counts
        assert "\n2\nrows" in f"\n{counts}", counts  # the two rows of flaky_tests
    finally:
        project.clear()
        project.submit()
        ui.wait_for(page, lambda d: ui.text_of(d, "notice").startswith("Showing the key's default"), "back")


PHONE_CHECK = """
    const view = document.getElementById("view");
    const broken = [...view.querySelectorAll("td, th, p, a, span, li, h2, h3, h4, label")].filter((e) => {
        if (e.closest(".mono, .token")) return false;
        const style = getComputedStyle(e);
        return style.overflowWrap === "anywhere" || style.wordBreak === "break-all";
    }).map((e) => e.tagName + "." + e.className);
    const apart = [...view.querySelectorAll("label[for]")].filter((label) => {
        const input = document.getElementById(label.htmlFor);
        if (!input) return true;
        const a = label.getBoundingClientRect(), b = input.getBoundingClientRect();
        return !label.parentElement.contains(input) || Math.abs(a.left - b.left) > 2 || b.top - a.bottom > 8;
    }).map((label) => label.htmlFor);
    const root = document.documentElement;
    return { wide: root.scrollWidth - root.clientWidth, broken, apart };
"""


@pytest.mark.parametrize(
    "name", ["search", "lessons", "lesson", "tables", "table", "history", "commit", "activity"]
)
def test_a_phone_layout_breaks_words_only_between_them(page: Any, seeded: Seeded, name: str) -> None:
    page.set_window_size(*PHONE)
    ui.show(page, views(seeded)[VIEW_NAMES.index(name)])
    found = page.execute_script(PHONE_CHECK)
    assert found == {"wide": 0, "broken": [], "apart": []}


def test_the_dark_theme_follows_the_system(page: Any) -> None:
    background = "return getComputedStyle(document.documentElement).backgroundColor"
    ui.show(page, "overview")
    light = page.execute_script(background)
    theme(page, "dark")
    dark = page.execute_script(background)

    def brightness(color: str) -> float:
        red, green, blue = (int(part) for part in re.findall(r"\d+", color)[:3])
        return (red + green + blue) / 3

    assert brightness(light) > 200 and brightness(dark) < 50, (light, dark)


def test_screenshots_of_the_main_views(page: Any, seeded: Seeded, screenshots: Path) -> None:
    shots = {"overview": "overview", "search": views(seeded)[1], "lesson": f"lesson/{seeded.lesson}"}
    shots |= {"history": "history", "duplicates": "duplicates", "activity": "activity"}
    for scheme in ("light", "dark"):
        theme(page, scheme)
        for size in (WIDE, PHONE):
            page.set_window_size(*size)
            for name, view in shots.items():
                ui.show(page, view)
                page.save_screenshot(str(screenshots / f"{name}-{size[0]}-{scheme}.png"))
    assert len(list(screenshots.glob("*-1280-dark.png"))) == len(shots)


screenshots = ui.screenshots


def test_the_skip_link_moves_to_the_content_and_stays_on_the_view(page: Any) -> None:
    from selenium.webdriver.common.keys import Keys

    ui.show(page, "lessons")
    skip = page.find_element("css selector", "a.skip")
    page.execute_script("arguments[0].focus()", skip)
    page.switch_to.active_element.send_keys(Keys.ENTER)
    assert page.switch_to.active_element.get_attribute("id") == "view"
    assert page.execute_script("return window.location.hash") == "#/lessons"
    assert ui.shown(page) == "#/lessons"
