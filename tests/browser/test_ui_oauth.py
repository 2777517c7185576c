"""Signing in to the page (``/ui``) through the team server's OAuth flow, in a real browser:
Debian's headless Chromium through chromedriver, on both backends. A person clicks "Sign in
with OAuth", approves on the consent page with their key for one project, and is back on the
page signed in: search finds that project's lesson and nothing of another project shows (page
and activity log); a refused access token is refreshed once (the refresh token rotates); signing
out revokes the tokens, which a plain HTTP request then finds refused. A denial, and a sign-in
that has ended, each bring one sentence on the sign-in screen; a server without OAuth offers no
OAuth button. Browser, skips and helpers as ``test_ui``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.http import build_app, server_config
from lore_mcp.transport.oauth.routes import team_auth
from stores import open_local_store
from tests.browser import test_ui as ui
from tests.support.helpers import call
from tests.support.team import TeamServer, free_port, raw_post, running, team_server

pytestmark = pytest.mark.process

# test_ui's browser: headless Chromium, or a skip saying why (a failure under CI=true).
driver = ui.driver
GROUPS = ("lessons", "structured", "history", "activity")
TOKENS = "lore.oauth.tokens"
DENIED = "UNAUTHORIZED: Sign-in was denied on Lore's consent page; nothing was signed in."
ENDED = "UNAUTHORIZED: Your sign-in has ended (it expired or was revoked); sign in again."


@contextlib.contextmanager
def oauth_team(store: Any, embedder: Embedder) -> Iterator[TeamServer]:
    """The team server with OAuth (its issuer a loopback address) and the activity group."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    verifier, auth = team_auth(store.keys, base)
    service = LessonService(store, embedder, default_project="default")
    server = build_server(
        service, keys=KeyService(store.keys), token_verifier=verifier, auth=auth, tools=GROUPS
    )
    app = build_app(
        server, host="127.0.0.1", health=lambda: None, store_name="test", rate_limit_per_minute=10_000
    )
    uv = uvicorn.Server(
        server_config(app, host="127.0.0.1", port=port, log_level="warning", drain_timeout_s=5)
    )
    with running(uv):
        yield TeamServer(url=f"{base}/mcp", base=base, keys=KeyService(store.keys))


@pytest.fixture
def lore(store: Any, embedder: Embedder) -> Iterator[TeamServer]:
    with oauth_team(store, embedder) as server:
        yield server


@pytest.fixture
def local_lore(tmp_path: Path, embedder: Embedder) -> Iterator[TeamServer]:
    """The team server over a SQLite file, ``ui.db`` in the test's temporary directory."""
    store = open_local_store(tmp_path / "ui.db")
    try:
        with oauth_team(store, embedder) as server:
            yield server
    finally:
        store.close()


def stored_tokens(driver: Any) -> dict[str, Any] | None:
    raw = driver.execute_script("return window.sessionStorage.getItem(arguments[0])", TOKENS)
    return json.loads(raw) if raw else None


def to_consent(driver: Any, server: TeamServer) -> None:
    """Open the page signed out and follow "Sign in with OAuth" to the consent page."""
    from selenium.webdriver.common.by import By

    driver.get(f"{server.base}/ui/")
    button = ui.wait_for(
        driver,
        lambda d: (
            d.find_element(By.ID, "oauth-button")
            if d.find_element(By.ID, "oauth-button").is_displayed()
            else None
        ),
        "the Sign in with OAuth button",
    )
    button.click()
    ui.wait_for(driver, lambda d: d.title == "Connect to Lore", "the consent page")
    assert driver.find_element(By.ID, "client").text == "Lore's page for people"


def approve(driver: Any, server: TeamServer, key: str, project: str = "") -> None:
    """Answer the consent page with ``key`` (for ``project``) and wait to be signed in on the page."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "api_key").send_keys(key)
    if project:
        driver.find_element(By.ID, "project").send_keys(project)
    driver.find_element(By.ID, "approve").click()
    ui.wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#nav a"), "the signed-in page")
    assert driver.current_url == f"{server.base}/ui/", "the code and state left the address bar"


def refused_within(url: str, token: str, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if raw_post(url, f"Bearer {token}").status_code == 401:
            return True
        time.sleep(0.1)
    return False


def two_projects(lore: TeamServer, root: str) -> dict[str, Any]:
    """A lesson in project alpha (returned) and one in beta, recalled there, saved with ``root``."""
    alpha: dict[str, Any] = ui.mcp(
        lore,
        root,
        lambda c: call(c, "save_lesson", problem="Alpha deploy needs VPN", resolution="Connect VPN first.",
                       project="alpha"),
    )  # fmt: skip
    ui.mcp(
        lore, root, lambda c: call(c, "save_lesson", problem="Beta secret rotation runbook",
                                   resolution="Rotate monthly.", project="beta")
    )  # fmt: skip
    ui.mcp(lore, root, lambda c: call(c, "recall_lessons", query="beta secret rotation", project="beta"))
    return alpha


def foreign_answers_are_refused(driver: Any, base: str) -> None:
    """Answers that are not this tab's, or not from this server, or an error of any text: one
    sentence each, the address bar cleaned, nothing of the parameters parsed as markup."""
    from selenium.webdriver.common.by import By

    pending = {"state": "s1", "verifier": "v" * 43, "issuer": base, "client": "c", "token": f"{base}/token"}
    hostile = "%3Cimg%20src%3Dx%20onerror%3Dwindow.__lorePwned%3D1%3E"
    for query, sentence in (
        ("code=lore_ac_x&state=s1&iss=https%3A%2F%2Fevil.example", "did not come from this page's server"),
        (f"code=lore_ac_x&state=other&iss={base}", "not for a sign-in this tab started"),
        (f"error={hostile}&state=s1&iss={base}", "did not complete"),
    ):
        driver.execute_script(
            "sessionStorage.setItem('lore.oauth.pending', JSON.stringify(arguments[0]))", pending
        )
        driver.get(f"{base}/ui/?{query}")
        ui.wait_for(driver, lambda d, s=sentence: s in ui.text_of(d, "error"), sentence)
        assert driver.current_url == f"{base}/ui/" and not driver.find_elements(By.CSS_SELECTOR, "img")
        assert driver.execute_script("return window.__lorePwned") is None


def test_a_person_signs_in_with_oauth_sees_one_project_and_signs_out(driver: Any, lore: TeamServer) -> None:
    from selenium.webdriver.common.by import By

    root = lore.keys.init_org("acme").key
    alpha = two_projects(lore, root)
    to_consent(driver, lore)
    approve(driver, lore, root, project="alpha")
    tokens = stored_tokens(driver)
    assert tokens and tokens["access"].startswith("lore_at_") and tokens["refresh"].startswith("lore_rt_")
    assert driver.execute_script("return window.localStorage.length") == 0, "nothing in localStorage"

    ui.show(driver, "search")
    driver.find_element(By.ID, "search-query").send_keys("deploy over VPN")
    driver.find_element(By.ID, "search-button").click()
    ui.wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"#results [data-id='{alpha['id']}']"),
                "the alpha lesson")  # fmt: skip
    for view in ("lessons", "search?q=secret%20rotation%20runbook", "activity", "activity?kind=recall"):
        ui.show(driver, view)
        assert "Beta" not in ui.text_of(driver, "view") and "beta" not in driver.page_source, view
    ui.show(driver, "activity")
    assert "deploy over VPN" in ui.text_of(driver, "activity"), "the page's own recall is in alpha's log"

    # A refused access token: the page refreshes once (the refresh token rotates) and goes on.
    driver.execute_script(
        "const t = JSON.parse(sessionStorage.getItem(arguments[0])); t.access = 'lore_at_' + 'x'.repeat(43);"
        "sessionStorage.setItem(arguments[0], JSON.stringify(t))",
        TOKENS,
    )
    driver.refresh()
    ui.wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#nav a"), "the page after a refresh")
    ui.show(driver, "lessons")
    assert "Alpha deploy needs VPN" in ui.text_of(driver, "view")
    renewed = stored_tokens(driver)
    assert renewed and renewed["refresh"] != tokens["refresh"] and renewed["access"] != tokens["access"]

    driver.find_element(By.ID, "signout").click()
    ui.wait_for(driver, lambda d: d.find_element(By.ID, "signin").is_displayed(), "the sign-in screen")
    assert stored_tokens(driver) is None
    assert refused_within(lore.url, renewed["access"]), "signing out revoked the access token"
    again = httpx2.post(
        f"{lore.base}/token",
        data={"grant_type": "refresh_token", "refresh_token": renewed["refresh"],
              "client_id": f"{lore.base}/ui/oauth-client.json"},
        timeout=30,
    )  # fmt: skip
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", "and the refresh token"


def test_a_denial_a_shared_refresh_and_an_ended_sign_in(
    driver: Any, local_lore: TeamServer, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    local_lore.keys.init_org("acme")
    bob = local_lore.keys.create_key("acme", name="bob", project=None, root=False)
    to_consent(driver, local_lore)
    driver.find_element(By.ID, "deny").click()
    ui.wait_for(driver, lambda d: ui.text_of(d, "error") == DENIED, "the denial's sentence")
    assert driver.find_element(By.ID, "signin").is_displayed()
    assert driver.current_url == f"{local_lore.base}/ui/", "the error left the address bar"

    foreign_answers_are_refused(driver, local_lore.base)
    to_consent(driver, local_lore)
    approve(driver, local_lore, bob.key)
    ui.show(driver, "lessons")
    first = stored_tokens(driver)
    # The access token expires while the page is open; the overview then sends two requests at
    # once, both refused: one refresh serves both (a rotated refresh token used twice would
    # revoke the sign-in), and the page goes on.
    with sqlite3.connect(tmp_path / "ui.db") as db:
        db.execute("UPDATE oauth_tokens SET expires_at = created_at WHERE kind = 'access'")
    ui.show(driver, "overview")
    ui.show(driver, "lessons")
    assert ui.text_of(driver, "error") == ""
    renewed = stored_tokens(driver)
    assert first and renewed and renewed["refresh"] != first["refresh"]
    assert raw_post(local_lore.url, f"Bearer {renewed['access']}").status_code == 200

    local_lore.keys.revoke_key("acme", bob.id)  # its tokens are refused, and cannot be refreshed
    driver.execute_script("window.location.hash = arguments[0]", "#/history")
    ui.wait_for(driver, lambda d: ui.text_of(d, "error") == ENDED, "the ended sign-in's sentence")
    assert driver.find_element(By.ID, "signin").is_displayed() and stored_tokens(driver) is None


def test_a_server_without_oauth_offers_no_oauth_button(
    driver: Any, tmp_path: Path, embedder: Embedder
) -> None:
    from selenium.webdriver.common.by import By

    store = open_local_store(tmp_path / "keys.db")
    try:
        with team_server(store, embedder) as keys_only:
            assert httpx2.get(f"{keys_only.base}/.well-known/oauth-authorization-server").status_code == 404
            driver.get(f"{keys_only.base}/ui/")
            ui.wait_for(
                driver,
                lambda d: d.find_element(By.ID, "oauth-signin").get_attribute("data-offered"),
                "the page to ask the server",
            )
            assert driver.find_element(By.ID, "oauth-signin").get_attribute("data-offered") == "no"
            assert not driver.find_element(By.ID, "oauth-button").is_displayed()
            assert driver.find_element(By.ID, "api-key").is_displayed()
    finally:
        store.close()
