"""The approval page in a real browser: headless Chromium, driven by Selenium, against gunicorn
serving the test database, with the provider played by a stand-in on 127.0.0.1. An agent's
call needs an approval; a member (signed in: the session cookie of a Django login set on the
browser) opens the page the agent was given, sees the request and clicks Allow once, and the
agent's repeat goes through, once; another call is denied the same way and its repeat is
refused; a signed-out browser sees only the sign-in page. Each page's text is checked and a
screenshot saved under var/screenshots/approvals/, where CI keeps it. Skipped where Chromium
and its driver are absent, except in `.ci/run`, which installs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from services.models import Approval, ApprovalKind, ApprovalStatus, AuditEvent, Grant, Member
from tests.support import pages
from tests.support.harness import BASE_DIR, Gunicorn, every_provider_at, request, server_env
from tests.support.helpers import database_url, marked
from tests.support.stand_ins import ProviderServer

SCREENSHOTS = BASE_DIR / "var" / "screenshots" / "approvals"

# It writes under var/, which the demo's test watches: one worker runs these modules in turn.
pytestmark = pytest.mark.xdist_group("var")

EMAIL = "dana@example.com"
PASSWORD = "a long passphrase 1"
ISSUE = "/api/v1/agent/proxy/github/repos/octo/hello/issues"


@dataclass
class Served:
    server: Gunicorn
    provider: ProviderServer
    agent_token: str
    stored: str

    def agent_call(self, body: dict) -> tuple[int, dict]:
        status, _, answer = request(
            "POST", f"{self.server.url}{ISSUE}", token=self.agent_token, body=body
        )
        return status, json.loads(answer)


@contextmanager
def served(account_token: str) -> Iterator[Served]:
    """gunicorn on the test database (with this process's SECRET_KEY, so that a session made
    here is good there), every provider at the stand-in, alice's github set stored through
    the API and agent `triage-agent`, whose POSTs under /repos need an approval."""
    provider = ProviderServer().start()
    try:
        env = server_env(
            database_url(),
            SECRET_KEY=settings.SECRET_KEY,
            CREDVAULT_PROVIDER_BASE_URLS=every_provider_at(provider.url),
        )
        server = Gunicorn(env, workers=1)
        env["CREDVAULT_PUBLIC_URL"] = server.url
        with server:
            stored = marked("gh")
            api = server.url + "/api/v1"
            body = {"service": "github", "credentials": [{"keyName": "api_key", "value": stored}]}
            assert (
                request("PUT", f"{api}/services/credentials", token=account_token, body=body)[0]
                == 201
            )
            grants = {"services": [{"service": "github"}]}
            assert (
                request("PUT", f"{api}/agents/triage-agent", token=account_token, body=grants)[0]
                == 201
            )
            Grant.objects.filter(agent__name="triage-agent").update(
                approve=[{"methods": ["POST"], "paths": ["/repos"]}]
            )
            status, _, issued = request(
                "POST", f"{api}/agents/triage-agent/tokens", token=account_token
            )
            assert status == 201
            yield Served(server, provider, json.loads(issued)["token"], stored)
    finally:
        provider.stop()


def sign_in(browser, site: Served, account) -> None:
    """A member of `account`, signed in the way a person does: email and password typed into
    the sign-in page."""
    User.objects.create_user(username=EMAIL, email=EMAIL, password=PASSWORD)
    Member.objects.create(account=account, user=User.objects.get(username=EMAIL))
    pages.sign_in(browser, site.server.url, email=EMAIL, password=PASSWORD)


def wait_for(browser, selector: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 15).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, selector))
    )


def text_of(browser, selector: str = "main") -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector).text


def click(browser, selector: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, selector).click()


def screenshot(browser, name: str, width: int = 1100) -> None:
    """The whole page, however tall, at `width` (a laptop's; a phone's is 390), which it fits
    without scrolling sideways."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.set_window_size(width, 800)
    chrome = 800 - browser.execute_script("return window.innerHeight")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, max(600, height) + chrome)
    wide, room = browser.execute_script(
        "const d = document.documentElement; return [d.scrollWidth, d.clientWidth];"
    )
    assert wide <= room, f"{name}: the page scrolls sideways ({wide} > {room})"
    assert browser.save_screenshot(str(SCREENSHOTS / name))


@pytest.mark.django_db(transaction=True)
def test_a_member_allows_once_and_the_agents_repeat_goes_through(alice_account_and_token, browser):
    account, token = alice_account_and_token
    with served(token) as site:
        site.provider.answer(201, {"number": 7})
        body = {"title": "Deploy failed", "body": f"token {site.stored} <b>bold</b>"}
        status, asked = site.agent_call(body)
        assert status == 403
        assert asked["code"] == "approval_required"
        assert asked["approvalUrl"] == f"{site.server.url}/approvals/{asked['approvalId']}"
        assert site.provider.requests == []

        sign_in(browser, site, account)
        browser.get(asked["approvalUrl"])
        wait_for(browser, "main h1")
        assert text_of(browser, "h1").startswith("Agent triage-agent asks to call github")
        page = text_of(browser)
        assert "POST /repos/octo/hello/issues" in page
        assert f"Signed in as {EMAIL}, account alice" in page
        assert "<b>bold</b>" in page  # shown as text, not as markup
        assert "[REDACTED]" in page
        assert site.stored not in browser.page_source
        assert "Allow once" in page
        assert "Allow for 30 minutes" in page
        screenshot(browser, "pending.png")
        screenshot(browser, "pending-phone.png", width=390)

        click(browser, "button[value=once]")
        wait_for(browser, ".outcome")
        assert browser.current_url == asked["approvalUrl"]
        outcome = text_of(browser, ".outcome")
        assert f"Allowed once by {EMAIL} at " in outcome
        assert "goes through once" in outcome
        assert "Allow once" not in text_of(browser)
        screenshot(browser, "allowed-once.png")

        status, answer = site.agent_call(body)
        assert status == 201, answer
        assert answer == {"number": 7}
        assert len(site.provider.requests) == 1
        assert site.stored in site.provider.requests[0].headers["Authorization"]
        status, again = site.agent_call(body)
        assert (status, again["code"]) == (403, "approval_required")
        assert len(site.provider.requests) == 1
        approved = AuditEvent.objects.get(action="approval.approved")
        assert approved.member == EMAIL

        browser.refresh()
        wait_for(browser, ".outcome")
        assert "The agent's call went through at " in text_of(browser, ".outcome")
        screenshot(browser, "used.png")


@pytest.mark.django_db(transaction=True)
def test_a_member_denies_and_the_agents_repeat_is_refused(alice_account_and_token, browser):
    account, token = alice_account_and_token
    with served(token) as site:
        body = {"title": "Delete the repository"}
        status, asked = site.agent_call(body)
        assert status == 403
        sign_in(browser, site, account)
        browser.get(asked["approvalUrl"])
        wait_for(browser, "button[value=deny]")
        click(browser, "button[value=deny]")
        wait_for(browser, ".outcome")
        assert f"Denied by {EMAIL} at " in text_of(browser, ".outcome")
        screenshot(browser, "denied.png")
        status, refused = site.agent_call(body)
        assert (status, refused["code"]) == (403, "approval_denied")
        assert site.provider.requests == []
        assert Approval.objects.get(id=asked["approvalId"]).status == ApprovalStatus.DENIED


@pytest.mark.django_db(transaction=True)
def test_a_signed_out_browser_sees_only_the_sign_in_page(alice_account_and_token, browser):
    _, token = alice_account_and_token
    with served(token) as site:
        status, asked = site.agent_call({"title": "Deploy failed"})
        assert status == 403
        browser.get(asked["approvalUrl"])
        wait_for(browser, "main h1")
        assert text_of(browser, "h1") == "Sign in to see this request"
        source = browser.page_source
        for hidden in ("triage-agent", "/repos/octo/hello/issues", "Deploy failed", "<form"):
            assert hidden not in source
        link = browser.find_element("css selector", "main a.button").get_attribute("href")
        assert link == (
            f"{site.server.url}/account/login?next=%2Fapprovals%2F{asked['approvalId']}"
        )
        screenshot(browser, "signed-out.png")


@pytest.mark.django_db(transaction=True)
def test_an_access_request_shows_its_grants_to_tick(alice_account_and_token, browser):
    """Rendering only: approving an access request is the access requests' own work."""
    account, token = alice_account_and_token
    with served(token) as site:
        now = timezone.now()
        grant = {"access": "proxy", "base": "", "graphql": []}
        approval = Approval.objects.create(
            account=account,
            agent=account.agents.get(name="triage-agent"),
            kind=ApprovalKind.ACCESS,
            created_at=now,
            expires_at=now + timedelta(hours=24),
            services=[
                {**grant, "service": "openai", "methods": ["POST"], "paths": ["/v1/chat"]},
                {**grant, "service": "slack", "methods": ["GET"], "paths": ["/"]},
            ],
            reason="To summarize the incident channel <#incidents> for the on-call report.",
            valid_for_minutes=120,
        )
        sign_in(browser, site, account)
        browser.get(f"{site.server.url}/approvals/{approval.id}")
        wait_for(browser, "button[value=approve]")
        page = text_of(browser)
        assert "Agent triage-agent asks for access" in page
        assert "<#incidents>" in page
        boxes = browser.find_elements("css selector", "input[type=checkbox][name=service]")
        assert [box.get_attribute("value") for box in boxes] == ["openai", "slack"]
        assert all(box.is_selected() for box in boxes)
        screenshot(browser, "access-request.png")
        screenshot(browser, "access-request-phone.png", width=390)
