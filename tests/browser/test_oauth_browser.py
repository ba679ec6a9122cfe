"""The whole OAuth connect in a real browser: headless Chromium, driven by Selenium, from
credvault's connect link (its own start page, where the person continues) through the
provider stand-in's consent page (tests/support/stand_ins.py) to credvault's callback page, served
by gunicorn on the test database. And the two ways another site could bind its connect to a
person's browser, refused: a form of another site posting to the start page, and the
provider's redirect opened in a browser that did not continue. Each page's text is checked and
a screenshot saved under var/screenshots/oauth/, where CI keeps it. Skipped where Chromium and
its driver are absent, except in `.ci/run`, which installs them.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from services.models import AuditEvent, ConnectedService
from tests.conftest import CHROMEDRIVER, CHROMIUM
from tests.support.harness import BASE_DIR, Gunicorn, request, server_env
from tests.support.helpers import database_url
from tests.support.stand_ins import OAuthServer

SCREENSHOTS = BASE_DIR / "var" / "screenshots" / "oauth"

# It writes under var/, which the demo's test watches: one worker runs these modules in turn.
pytestmark = pytest.mark.xdist_group("var")

SECRET = "MARKED-SECRET-browser-client"


@dataclass
class Served:
    server: Gunicorn
    stand_in: OAuthServer
    token: str

    def connect_link(self) -> str:
        status, _, body = request(
            "POST", f"{self.server.url}/api/v1/connect/github", token=self.token
        )
        assert status == 201, body
        return json.loads(body)["authorizeUrl"]


@contextmanager
def served(token: str) -> Iterator[Served]:
    """gunicorn on the test database, GitHub's OAuth played by the stand-in, and the
    account's GitHub client stored."""
    stand_in = OAuthServer().start()
    try:
        urls = {"authorize": f"{stand_in.url}/authorize", "token": f"{stand_in.url}/token"}
        env = server_env(
            database_url(),
            CREDVAULT_PROVIDER_OAUTH_URLS=json.dumps({"github": urls}),
            CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": f"{stand_in.url}/api"}),
        )
        server = Gunicorn(env, workers=1)
        env["CREDVAULT_PUBLIC_URL"] = server.url
        with server:
            status, _, _ = request(
                "PUT",
                f"{server.url}/api/v1/oauth-clients/github",
                token=token,
                body={"clientId": "browser-client", "clientSecret": SECRET},
            )
            assert status == 201
            yield Served(server, stand_in, token)
    finally:
        stand_in.stop()


def wait_for_page(browser, tag: str = "main") -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 15).until(
        expected_conditions.presence_of_element_located((By.TAG_NAME, tag))
    )


def wait_for_url(browser, prefix: str) -> None:
    """Until the browser is at an address that starts with `prefix`: a click returns as soon
    as the form is submitted, before the next page has loaded."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 15).until(expected_conditions.url_contains(prefix))
    assert browser.current_url.startswith(prefix)
    wait_for_page(browser, "body")


def text_of(browser, tag: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.TAG_NAME, tag).text


def click(browser, selector: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, selector).click()


def screenshot(browser, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOTS / name))


def connect_cookies(browser) -> list[dict]:
    return [c for c in browser.get_cookies() if "credvault_connect_" in c["name"]]


@pytest.mark.django_db(transaction=True)
def test_a_person_connects_github_in_a_browser(alice_account_and_token, browser):
    _, token = alice_account_and_token
    with served(token) as site:
        link = site.connect_link()
        assert link.startswith(f"{site.server.url}/oauth/start/")

        # credvault's own page: who asks to connect what; a button to continue.
        browser.get(link)
        wait_for_page(browser)
        assert text_of(browser, "h1") == "Connect GitHub to credvault"
        text = text_of(browser, "main")
        assert "The credvault account alice asks to connect your GitHub account" in text
        assert "as the service github" in text
        assert "If someone sent you this link, close this window." in text
        screenshot(browser, "start.png")
        page = browser.page_source
        assert link.rsplit("/", 1)[1] not in page
        assert SECRET not in page
        assert connect_cookies(browser) == []

        # Continuing: a cookie for this connect, and the provider's consent page.
        click(browser, "form button")
        wait_for_url(browser, f"{site.stand_in.url}/authorize?")
        assert "Stand-in consent" in browser.page_source
        [cookie] = connect_cookies(browser)
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Lax"
        assert cookie["path"] == "/"
        click(browser, "#allow")
        wait_for_url(browser, f"{site.server.url}/oauth/callback?")
        heading = text_of(browser, "h1")
        text = text_of(browser, "main")
        screenshot(browser, "connected.png")
        assert heading == "GitHub is connected"
        assert "github" in text
        page = browser.page_source
        for value in site.stand_in.access_tokens | site.stand_in.refresh_tokens | {SECRET}:
            assert value not in page
        assert connect_cookies(browser) == []  # the callback forgot it

        # The same callback again: refused, and the page says why.
        browser.refresh()
        wait_for_page(browser)
        assert text_of(browser, "h1") == "Not connected"
        assert "used already" in text_of(browser, "main")
        screenshot(browser, "replayed.png")
        # The start link again: used.
        browser.get(link)
        wait_for_page(browser)
        assert "used already" in text_of(browser, "main")
    assert ConnectedService.objects.filter(service="github", key_type="oauth").exists()
    assert AuditEvent.objects.filter(action="oauth.callback", outcome="success").count() == 1


@contextmanager
def another_site(target: str) -> Iterator[str]:
    """A page of another site (http://localhost:PORT, where credvault is 127.0.0.1) with a form
    that posts to `target`, the way a site that wants its own connect bound to a visitor's
    browser would; its address."""
    page = (
        "<!doctype html><title>Free stickers</title><h1>Free stickers</h1>"
        f'<form method="post" action="{html.escape(target)}">'
        '<button id="claim" type="submit">Claim</button></form>'
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db(transaction=True)
def test_another_sites_form_cannot_continue_a_connect(alice_account_and_token, browser):
    """The attacker's connect link, submitted by the attacker's page in the person's browser:
    refused, no cookie set, never sent to the provider. The link still works from its own
    page."""
    _, token = alice_account_and_token
    with served(token) as site:
        link = site.connect_link()
        with another_site(link) as attacker:
            browser.get(attacker)
            wait_for_page(browser, "h1")
            click(browser, "#claim")
            wait_for_url(browser, link)
            assert text_of(browser, "h1") == "Not connected"
            assert "continues only from its own page" in text_of(browser, "main")
            screenshot(browser, "other_site.png")
        browser.get(link)
        wait_for_page(browser)
        assert connect_cookies(browser) == []
        assert site.stand_in.codes == {}  # nobody was sent to the provider
        click(browser, "form button")
        wait_for_url(browser, f"{site.stand_in.url}/authorize?")
        assert "Stand-in consent" in browser.page_source
    refused = AuditEvent.objects.get(action="oauth.connect", target="other_site")
    assert (refused.status, refused.outcome) == (403, "refused")


@pytest.fixture
def second_browser(browser) -> Iterator:
    """Another person's headless Chromium, with cookies of its own."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.mark.django_db(transaction=True)
def test_the_providers_redirect_in_another_browser_connects_nothing(
    alice_account_and_token, browser, second_browser
):
    """The attacker continues their own connect and sends the provider's link (with its
    state) to the person, whose browser consents and lands on the callback: refused, nothing
    sent, nothing stored. The browser that continued can still finish."""
    from selenium.webdriver.common.by import By

    _, token = alice_account_and_token
    with served(token) as site:
        browser.get(site.connect_link())
        wait_for_page(browser)
        click(browser, "form button")
        wait_for_url(browser, f"{site.stand_in.url}/authorize?")
        provider_link = browser.current_url

        second_browser.get(provider_link)
        wait_for_page(second_browser, "h1")
        second_browser.find_element(By.ID, "allow").click()
        wait_for_url(second_browser, f"{site.server.url}/oauth/callback?")
        assert text_of(second_browser, "h1") == "Not connected"
        text = text_of(second_browser, "main")
        assert "This browser did not continue this connection" in text
        assert "Nothing was stored." in text
        screenshot(second_browser, "other_browser.png")
        assert site.stand_in.token_requests == []

        click(browser, "#allow")
        wait_for_url(browser, f"{site.server.url}/oauth/callback?")
        assert text_of(browser, "h1") == "GitHub is connected"
    refused = AuditEvent.objects.get(action="oauth.callback", target="other_browser")
    assert (refused.status, refused.outcome) == (400, "refused")
    assert ConnectedService.objects.filter(service="github").count() == 1
