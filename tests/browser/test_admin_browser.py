"""The admin in a real browser: headless Chromium at 1400x900, logged in as staff, against
gunicorn serving the test database. Every list and every kind of object's page fits its width
(the token and audit lists once overflowed it), and each page is titled by the object's name.
A screenshot of every page is saved under var/screenshots/admin/, where CI keeps it.

Skipped where selenium (the `dev` extra) or Chromium and its driver (Debian: `apt-get install
chromium chromium-driver`) are absent.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from services.models import Account, AgentToken, ApiToken, AuditEvent, ConnectedService
from tests.support.harness import BASE_DIR, Gunicorn, server_env
from tests.support.helpers import agent_with_token, database_url, store_set

PASSWORD = "staff-password"
LONG_SERVICE = "custom-customer-relationship-manager"
SCREENSHOTS = BASE_DIR / "var" / "screenshots" / "admin"

# It writes under var/, which the demo's test watches: one worker runs these modules in turn.
pytestmark = pytest.mark.xdist_group("var")

# Each list with the widest rows the seed below makes; the accounts list with its overview.
LISTS = [
    "/admin/services/account/",
    "/admin/services/apitoken/",
    "/admin/services/agenttoken/",
    "/admin/services/connectedservice/",
    "/admin/services/agent/",
    "/admin/services/auditevent/",
]


@pytest.fixture
def seeded(alice, bob):
    """Long names everywhere a list shows one, and every kind of row."""
    User.objects.create_superuser("staff", "staff@example.com", PASSWORD)
    for account in (alice, bob):
        store_set(account, LONG_SERVICE, api_key="v", client_secret="w")
        agent_with_token(
            account,
            "nightly-reconciliation-and-reporting-agent",
            [LONG_SERVICE, "github", "openai"],
        )


def log_in(driver, url: str) -> None:
    """Submits the login form and waits for the page after it: the click returns as soon as the
    form is submitted, before the admin index has loaded (CI once looked too early)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/admin/login/")
    driver.find_element(By.NAME, "username").send_keys("staff")
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    try:
        WebDriverWait(driver, 15).until(
            expected_conditions.presence_of_element_located((By.ID, "user-tools"))
        )
    except TimeoutException:
        pytest.fail(f"not logged in: {driver.current_url} shows {driver.title!r}")


def fits(driver, box: str) -> None:
    """Neither `box` (a CSS selector) nor the page is wider than the window gives it."""
    inner, page = driver.execute_script(
        "const r = document.querySelector(arguments[0]);"
        "const d = document.documentElement;"
        "return [[r.scrollWidth, r.clientWidth], [d.scrollWidth, d.clientWidth]];",
        box,
    )
    assert inner[0] <= inner[1], f"{driver.current_url}: {box} overflows its box: {inner}"
    assert page[0] <= page[1], f"{driver.current_url}: the page scrolls sideways: {page}"


def screenshot(driver, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


@pytest.mark.django_db(transaction=True)
def test_every_admin_list_fits_1400_pixels(seeded, browser):
    with Gunicorn(server_env(database_url()), workers=1) as server:
        log_in(browser, server.url)
        for path in LISTS:
            browser.get(f"{server.url}{path}")
            fits(browser, "#changelist .results")
            screenshot(browser, f"list-{path.strip('/').split('/')[-1]}")


@pytest.mark.django_db(transaction=True)
def test_every_kind_of_object_page_fits_and_is_titled_by_name(seeded, browser):
    from selenium.webdriver.common.by import By

    account = Account.objects.get(name="alice")
    pages = {
        "account": (account, "alice"),
        "apitoken": (ApiToken.objects.filter(account=account).first(), None),
        "agenttoken": (AgentToken.objects.filter(account=account).first(), None),
        "connectedservice": (
            ConnectedService.objects.get(
                account=account, service="custom-customer-relationship-manager"
            ),
            "custom-customer-relationship-manager",
        ),
        "agent": (account.agents.get(), "nightly-reconciliation-and-reporting-agent"),
        "auditevent": (AuditEvent.objects.filter(account=account).order_by("-seq").first(), None),
    }
    with Gunicorn(server_env(database_url()), workers=1) as server:
        log_in(browser, server.url)
        for model, (obj, name) in pages.items():
            browser.get(f"{server.url}/admin/services/{model}/{obj.pk}/change/")
            fits(browser, "#content")
            heading = browser.find_element(By.CSS_SELECTOR, "#content h2").text
            assert heading == str(obj), f"{model}: the page is titled {heading!r}"
            assert f"object ({obj.pk})" not in browser.title
            if name is not None:
                assert name in heading
            screenshot(browser, f"page-{model}")
