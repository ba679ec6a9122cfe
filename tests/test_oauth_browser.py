"""The whole OAuth connect in a real browser: headless Chromium, driven by
Selenium, from credvault's authorization link through the provider stand-in's consent page
(scripts/stand_ins.py) to credvault's callback page, served by gunicorn on the test database.
The page's text is checked and a screenshot saved under var/screenshots/oauth/, where CI keeps
it. Skipped where Chromium and its driver are absent, except in `.ci/run`, which installs them.
"""

from __future__ import annotations

import json

import pytest

from scripts.harness import BASE_DIR, Gunicorn, request, server_env
from scripts.stand_ins import OAuthServer
from services.models import AuditEvent, ConnectedService
from tests.support import database_url

SCREENSHOTS = BASE_DIR / "var" / "screenshots" / "oauth"


@pytest.mark.django_db(transaction=True)
def test_a_person_connects_github_in_a_browser(alice_account_and_token, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    _, token = alice_account_and_token
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
            secret = "MARKED-SECRET-browser-client"
            status, _, _ = request(
                "PUT",
                f"{server.url}/api/v1/oauth-clients/github",
                token=token,
                body={"clientId": "browser-client", "clientSecret": secret},
            )
            assert status == 201
            status, _, body = request("POST", f"{server.url}/api/v1/connect/github", token=token)
            assert status == 201
            authorize_url = json.loads(body)["authorizeUrl"]

            browser.get(authorize_url)
            assert "Stand-in consent" in browser.page_source
            browser.find_element(By.ID, "allow").click()
            WebDriverWait(browser, 15).until(
                expected_conditions.presence_of_element_located((By.TAG_NAME, "main"))
            )
            assert browser.current_url.startswith(f"{server.url}/oauth/callback?")
            heading = browser.find_element(By.TAG_NAME, "h1").text
            text = browser.find_element(By.TAG_NAME, "main").text
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            assert browser.save_screenshot(str(SCREENSHOTS / "connected.png"))
            assert heading == "GitHub is connected"
            assert "github" in text
            page = browser.page_source
            for value in stand_in.access_tokens | stand_in.refresh_tokens | {secret}:
                assert value not in page

            # The same link again: refused, and the page says why.
            browser.refresh()
            WebDriverWait(browser, 15).until(
                expected_conditions.presence_of_element_located((By.TAG_NAME, "main"))
            )
            assert browser.find_element(By.TAG_NAME, "h1").text == "Not connected"
            assert "used already" in browser.find_element(By.TAG_NAME, "main").text
            assert browser.save_screenshot(str(SCREENSHOTS / "replayed.png"))
    finally:
        stand_in.stop()
    assert ConnectedService.objects.filter(service="github", key_type="oauth").exists()
    assert AuditEvent.objects.filter(action="oauth.callback", outcome="success").count() == 1
