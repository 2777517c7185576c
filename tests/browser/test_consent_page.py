"""The consent page in a real browser: Debian's headless Chromium, driven through chromedriver
with Selenium. A person approves with a key (and lets the browser remember it), approves
again with the remembered key, and denies; a client name full of HTML stays text.

Skipped, saying why, only where Chromium is not installed; under ``CI=true`` a missing
browser fails instead (``.ci/run`` installs ``chromium`` and ``chromium-driver``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from lore_mcp.embedding.embedder import Embedder
from stores import open_local_store
from tests.support.oauth import OAuthServer, oauth_server, pkce, serve_in_thread
from tests.support.team import free_port, raw_post

# Chromium is a process of its own, and the slowest thing these tests wait for.
pytestmark = pytest.mark.process

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
HOSTILE_NAME = '<img src=x onerror="document.title=1">Sneaky & "quoted"'


@pytest.fixture
def driver() -> Iterator[Any]:
    yield from chromium()


def chromium() -> Iterator[Any]:
    """Headless Chromium through chromedriver until the generator closes (a skip without it)."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        reason = (
            "Debian's chromium and chromium-driver are not installed "
            "(apt-get install -y chromium chromium-driver; .ci/run does it)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser tests must run in CI: {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def lore(tmp_path: Path, embedder: Embedder) -> Iterator[OAuthServer]:
    store = open_local_store(tmp_path / "lore.db")
    try:
        with oauth_server(store, embedder) as server:
            yield server
    finally:
        store.close()


@pytest.fixture
def callback() -> Iterator[str]:
    """The client's redirect URI: a loopback page that only says it got the answer."""
    port = free_port()
    app = Starlette(routes=[Route("/callback", lambda request: PlainTextResponse("received"))])
    with serve_in_thread(app, port):
        yield f"http://127.0.0.1:{port}/callback"


def start(lore: OAuthServer, redirect: str) -> tuple[str, str, str]:
    """Register a client and make its authorization URL; (client id, URL, PKCE verifier)."""
    client_id = httpx2.post(
        f"{lore.base}/register",
        json={"client_name": HOSTILE_NAME, "redirect_uris": [redirect], "token_endpoint_auth_method": "none"},
        timeout=30,
    ).json()["client_id"]
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "browser-state",
        "resource": lore.url,
    }
    return client_id, f"{lore.base}/authorize?{urlencode(query)}", verifier


def answered(driver: Any, redirect: str) -> dict[str, str]:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, 30).until(lambda d: d.current_url.startswith(redirect))
    except TimeoutException:
        pytest.fail(f"the browser stayed at {driver.current_url}: {driver.page_source[:2000]}")
    return {k: v[0] for k, v in parse_qs(urlsplit(driver.current_url).query).items()}


def test_a_person_approves_in_a_browser_then_again_with_the_remembered_key_then_denies(
    driver: Any, lore: OAuthServer, callback: str
) -> None:
    from selenium.webdriver.common.by import By

    key = lore.keys.init_org("acme").key
    client_id, url, verifier = start(lore, callback)
    driver.get(url)
    assert driver.title == "Connect to Lore"
    assert driver.find_element(By.ID, "client").text == HOSTILE_NAME, "the name is shown as text"
    assert driver.find_element(By.ID, "redirect-host").text == "127.0.0.1"
    assert not driver.find_elements(By.CSS_SELECTOR, "img"), "no markup from the client reached the page"
    driver.find_element(By.ID, "api_key").send_keys(key)
    driver.find_element(By.ID, "remember").click()
    driver.find_element(By.ID, "approve").click()
    got = answered(driver, callback)
    assert got["state"] == "browser-state" and got["iss"] == lore.base
    tokens = httpx2.post(
        f"{lore.base}/token",
        data={
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": got["code"],
            "code_verifier": verifier,
            "redirect_uri": callback,
        },
        timeout=30,
    ).json()
    assert raw_post(lore.url, f"Bearer {tokens['access_token']}").status_code == 200

    # The same browser again: the key is remembered (a signed cookie), so the person only approves.
    _, url, _ = start(lore, callback)
    driver.get(url)
    assert "approved before with the key" in driver.page_source
    driver.find_element(By.ID, "approve").click()
    assert answered(driver, callback)["code"].startswith("lore_ac_")
    driver.get(f"{lore.base}/oauth/consent")  # the cookies' path, to read them
    cookies = {cookie["name"]: cookie for cookie in driver.get_cookies()}
    remembered = cookies["lore_oauth_key"]
    assert remembered["httpOnly"] and remembered["sameSite"] == "Lax" and key not in remembered["value"]

    # And a denial goes back to the client as access_denied.
    _, url, _ = start(lore, callback)
    driver.get(url)
    driver.find_element(By.ID, "deny").click()
    assert answered(driver, callback)["error"] == "access_denied"
