"""The page for people (``/ui``) in a real browser: Debian's headless Chromium through
chromedriver, against a real team server on both backends. The page is an MCP client of its
own; the data it shows is saved here through the SDK's MCP client, as an agent would.

Skipped, saying why, only where Chromium is not installed; under ``CI=true`` a missing
browser fails instead (the ``driver`` fixture of ``test_consent_page``). Screenshots of the
main views go to ``LORE_UI_SCREENSHOTS`` (default: the test's temporary directory).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from ulid import ULID

from lore_mcp.embedding.embedder import Embedder
from stores import open_local_store
from tests.browser import test_consent_page
from tests.support.helpers import call
from tests.support.team import TeamServer, http_client, team_server

pytestmark = pytest.mark.process

# The consent page's browser fixture: headless Chromium, or a skip saying why (a failure under CI=true).
driver = test_consent_page.driver

WAIT_S = 30
HOSTILE_PROBLEM = '<script>window.__lorePwned = 1</script>Build <b>breaks</b> & "quotes"'
HOSTILE_RESOLUTION = '<img src=x onerror="window.__lorePwned = 2"><a href="javascript:alert(1)">x</a>'


@pytest.fixture
def lore(store: Any, embedder: Embedder) -> Iterator[TeamServer]:
    """The team server over the ``store`` fixture (SQLite and Postgres)."""
    with team_server(store, embedder) as server:
        yield server


@pytest.fixture
def local_lore(tmp_path: Path, embedder: Embedder) -> Iterator[TeamServer]:
    """The team server over a SQLite file, for what the backend does not change."""
    store = open_local_store(tmp_path / "ui.db")
    try:
        with team_server(store, embedder) as server:
            yield server
    finally:
        store.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LORE_UI_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def mcp(server: TeamServer, key: str, work: Callable[[Any], Any]) -> Any:
    """Run ``work(client)`` with the SDK's MCP client over HTTP, as an agent with ``key``."""

    async def run() -> Any:
        async with http_client(server.url, key) as client:
            return await work(client)

    return anyio.run(run)


def wait_for(driver: Any, check: Callable[[Any], Any], what: str) -> Any:
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.support.ui import WebDriverWait

    # The page re-renders a view after each change, so an element looked at may be replaced.
    ignored = (NoSuchElementException, StaleElementReferenceException)
    try:
        return WebDriverWait(driver, WAIT_S, ignored_exceptions=ignored).until(check)
    except TimeoutException:
        error = text_of(driver, "error")
        pytest.fail(f"waited for {what}; the page says {error!r}: {text_of(driver, 'view')[:1500]}")


def text_of(driver: Any, element_id: str) -> str:
    """The text the element shows ("" when there is none), read in one step of the page."""
    script = "const e = document.getElementById(arguments[0]); return e ? e.innerText.trim() : ''"
    return str(driver.execute_script(script, element_id))


def open_page(driver: Any, server: TeamServer, key: str, view: str = "overview") -> None:
    """Open the page as ``lore-memory ui`` does (the key in the fragment), at ``view``."""
    driver.get(f"{server.base}/ui/#key={key}")
    wait_for(driver, lambda d: d.find_elements("css selector", "#nav a"), "the signed-in page")
    show(driver, view)


def show(driver: Any, view: str) -> None:
    """Go to ``view`` and wait until the page has shown it (``data-shown`` on its main element)."""
    driver.execute_script("window.location.hash = arguments[0]", f"#/{view}")
    wait_for(driver, lambda d: shown(d) == f"#/{view}", view)


def shown(driver: Any) -> str | None:
    return driver.find_element("id", "view").get_attribute("data-shown")


def accept(driver: Any) -> None:
    """Say yes to the page's confirmation."""
    wait_for(driver, lambda d: _alert(d), "a confirmation").accept()


def _alert(driver: Any) -> Any:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return driver.switch_to.alert
    except NoAlertPresentException:
        return None


def snap(driver: Any, folder: Path, name: str, size: tuple[int, int] = (1280, 900)) -> None:
    driver.set_window_size(*size)
    driver.save_screenshot(str(folder / f"{name}.png"))


def import_examples(client: Any) -> Any:
    """Lessons over two weeks with tags and votes, two that say nearly the same, and a table."""
    now = datetime.now(UTC)
    topics = [
        (
            "pytest hangs on CI with xdist",
            "Pin pytest-xdist below 4 and pass --dist loadscope.",
            ["ci", "python"],
        ),
        (
            "Docker build cannot reach PyPI",
            "Set PIP_INDEX_URL to the mirror in the build args.",
            ["docker", "ci"],
        ),
        ("Postgres refuses connections after deploy", "Raise max_connections or pool the app.", ["postgres"]),
        (
            "numpy 2 breaks the wheel build",
            "Pin numpy<2 until the C extension is rebuilt.",
            ["python", "build"],
        ),
        (
            "numpy 2.0 breaks building the wheel",
            "Pin numpy below 2 until the extension is rebuilt.",
            ["python"],
        ),
        ("Timezone bug in nightly report", "Store UTC; convert in the template only.", ["dates"]),
    ]
    lessons = [
        {
            "id": str(ULID.from_datetime(now - timedelta(days=12 - 2 * i))),
            "problem": problem,
            "resolution": resolution,
            "tags": tags,
            "upvotes": (5 - i) % 4,
            "downvotes": i % 2,
            "created_at": (now - timedelta(days=12 - 2 * i)).isoformat(),
        }
        for i, (problem, resolution, tags) in enumerate(topics)
    ]

    async def work(mcp_client: Any) -> None:
        await call(mcp_client, "import_lessons", lessons=lessons)
        schema = await call(mcp_client, "schema")
        plan = {
            "baseSchemaHash": schema["schema_hash"],
            "message": "track flaky tests",
            "operations": [
                {
                    "op": "create_table",
                    "table": "flaky_tests",
                    "columns": [{"name": "name", "type": "text"}, {"name": "failures", "type": "integer"}],
                },
                {
                    "op": "insert",
                    "table": "flaky_tests",
                    "rows": [{"name": "test_sync", "failures": 4}, {"name": "test_upload", "failures": 1}],
                },
            ],
        }
        await call(mcp_client, "apply", plan=plan)

    return client(work)


def test_search_edit_history_conflict_and_revert(
    driver: Any, lore: TeamServer, backend: str, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By

    key = lore.keys.init_org("local").key
    import_examples(lambda work: mcp(lore, key, work))
    saved = mcp(
        lore,
        key,
        lambda c: call(
            c,
            "save_lesson",
            problem="Flaky upload test times out",
            resolution="Raise the S3 client timeout to 30 s.",
            tags=["ci"],
        ),
    )
    open_page(driver, lore, key, "search")
    driver.find_element(By.ID, "search-query").send_keys("upload test timing out")
    driver.find_element(By.ID, "search-button").click()
    found = wait_for(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, f"#results [data-id='{saved['id']}']"),
        "the saved lesson",
    )
    assert "Flaky upload test times out" in found[0].text and "score" in found[0].text
    if backend == "local":
        snap(driver, screenshots, "search")

    found[0].find_element(By.CSS_SELECTOR, "a.problem").click()
    wait_for(driver, lambda d: d.find_elements(By.ID, "field-resolution"), "the lesson's page")
    driver.find_element(By.ID, "upvote").click()
    wait_for(driver, lambda d: text_of(d, "field-votes").startswith("▲ 1"), "the vote")
    driver.find_element(By.ID, "edit").click()
    resolution = driver.find_element(By.ID, "edit-resolution")
    resolution.clear()
    resolution.send_keys("Raise the S3 client timeout to 60 s and retry twice.")
    driver.find_element(By.ID, "save-edit").click()
    accept(driver)
    wait_for(driver, lambda d: "60 s" in text_of(d, "field-resolution"), "the edit")
    update = wait_for(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, ".commit[data-kind='update']"),
        "the update in history",
    )[0]
    assert (
        update.find_element(By.CSS_SELECTOR, "tr[data-field='resolution'] td.before").text
        == "Raise the S3 client timeout to 30 s."
    )
    assert (
        "60 s and retry twice"
        in update.find_element(By.CSS_SELECTOR, "tr[data-field='resolution'] td.after").text
    )
    update_id = update.get_attribute("data-commit")
    if backend == "local":
        snap(driver, screenshots, "lesson")

    # Reverting the save while a later edit touched the lesson is refused: the tool's own sentence.
    driver.find_element(By.CSS_SELECTOR, ".commit[data-kind='save'] button.revert").click()
    accept(driver)
    wait_for(driver, lambda d: text_of(d, "error").startswith("CONFLICT: "), "the CONFLICT sentence")
    assert "60 s" in text_of(driver, "field-resolution"), "a refused revert changes nothing"

    driver.find_element(By.CSS_SELECTOR, ".commit[data-kind='update'] button.revert").click()
    accept(driver)
    wait_for(
        driver,
        lambda d: text_of(d, "field-resolution") == "Raise the S3 client timeout to 30 s.",
        "the revert",
    )
    assert text_of(driver, "error") == ""
    restored = mcp(lore, key, lambda c: call(c, "get_lesson", id=saved["id"]))
    assert restored["resolution"] == "Raise the S3 client timeout to 30 s."
    if backend == "local":
        for view in ("overview", "history", f"commit/{update_id}", "tables/flaky_tests", "duplicates"):
            show(driver, view)
            snap(driver, screenshots, view.split("/")[0].split("?")[0])
        show(driver, "lessons")
        snap(driver, screenshots, "lessons-phone", (390, 844))


def test_a_lesson_with_markup_and_script_is_shown_as_text(driver: Any, local_lore: TeamServer) -> None:
    from selenium.webdriver.common.by import By

    key = local_lore.keys.init_org("local").key
    saved = mcp(
        local_lore,
        key,
        lambda c: call(
            c, "save_lesson", problem=HOSTILE_PROBLEM, resolution=HOSTILE_RESOLUTION, tags=["<i>tag</i>"]
        ),
    )
    for view in ("lessons", f"lesson/{saved['id']}", "search?q=Build%20breaks", "overview"):
        open_page(driver, local_lore, key, view)
        view_text = text_of(driver, "view")
        if view == "overview":  # the plots' labels: the start of the problem, and the tag
            assert "<script>window.__lorePwned" in view_text and "<i>tag</i>" in view_text
        else:
            assert HOSTILE_PROBLEM in view_text and HOSTILE_RESOLUTION in view_text, view
        for tag in ("script", "img", "b", "i"):
            assert not driver.find_elements(By.CSS_SELECTOR, f"#view {tag}"), (
                f"a <{tag}> from stored text reached {view}"
            )
        assert not driver.find_elements(By.CSS_SELECTOR, "#view a[href^='javascript:']"), view
        assert driver.execute_script("return window.__lorePwned") is None, f"stored script ran on {view}"


def test_a_key_for_one_project_sees_nothing_of_another(driver: Any, local_lore: TeamServer) -> None:
    from selenium.webdriver.common.by import By

    root = local_lore.keys.init_org("local").key
    mcp(
        local_lore,
        root,
        lambda c: call(
            c,
            "save_lesson",
            problem="Alpha deploy needs VPN",
            resolution="Connect VPN first.",
            project="alpha",
        ),
    )
    mcp(
        local_lore,
        root,
        lambda c: call(
            c,
            "save_lesson",
            problem="Beta secret rotation runbook",
            resolution="Rotate monthly.",
            project="beta",
        ),
    )
    alpha = local_lore.keys.create_key("local", name="alpha-only", project="alpha", root=False).key

    driver.get(f"{local_lore.base}/ui/")
    field = wait_for(
        driver,
        lambda d: (
            d.find_element(By.ID, "api-key") if d.find_element(By.ID, "api-key").is_displayed() else None
        ),
        "the sign-in form",
    )
    field.send_keys("lore_sk_" + "x" * 32)
    driver.find_element(By.ID, "signin-button").click()
    wait_for(driver, lambda d: text_of(d, "error").startswith("UNAUTHORIZED: "), "the refusal of a wrong key")

    field.clear()
    field.send_keys(alpha)
    driver.find_element(By.ID, "signin-button").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#nav a"), "the signed-in page")
    for view in ("lessons", "search?q=secret%20rotation%20runbook", "history", "overview"):
        show(driver, view)
        assert "Beta" not in text_of(driver, "view"), view
        assert "beta" not in driver.page_source, view
    show(driver, "lessons")
    assert "Alpha deploy needs VPN" in text_of(driver, "view")

    project = driver.find_element(By.ID, "project")
    project.clear()
    project.send_keys("beta")
    project.submit()
    # The switcher offers only the key's projects, and refuses any other name before asking.
    wait_for(driver, lambda d: text_of(d, "error").startswith("NOT_FOUND: beta is not one"), "the refusal")
    assert "Beta secret" not in text_of(driver, "view")
