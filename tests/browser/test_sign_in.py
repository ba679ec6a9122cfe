"""A member signs in with a real browser: headless Chromium at 1400x900 against gunicorn
serving the test database. The one-time link sets the password and signs in; a wrong password
is told; signing out and in again works; a member removed is signed out at the next page.
Screenshots of every step under var/screenshots/sign-in/.

Skipped where selenium (the `dev` extra) or Chromium and its driver are absent.
"""

from __future__ import annotations

import pytest

from services.members import create_member, remove_member
from tests.support.harness import BASE_DIR, Gunicorn, server_env
from tests.support.helpers import database_url, marked
from tests.support.pages import wait_for_url

SCREENSHOTS = BASE_DIR / "var" / "screenshots" / "sign-in"

# It writes under var/, which the demo's test watches: one worker runs these modules in turn.
pytestmark = pytest.mark.xdist_group("var")


def screenshot(driver, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def submit(driver, fields: dict[str, str], *, then: str) -> None:
    """Fill the form's fields, send it, and wait for a page holding the text `then`."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    for name, value in fields.items():
        box = driver.find_element(By.NAME, name)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    try:
        # The page is replaced while it is read: a body found on the old page goes stale.
        waiting = WebDriverWait(driver, 15, ignored_exceptions=(StaleElementReferenceException,))
        waiting.until(lambda d: then in body(d))
    except TimeoutException:
        screenshot(driver, "failed")
        pytest.fail(f"{driver.current_url} shows {body(driver)!r}, not {then!r}")


def body(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


@pytest.mark.django_db(transaction=True)
def test_a_member_sets_a_password_signs_out_and_in_and_is_removed(alice, browser):
    from selenium.webdriver.common.by import By

    link = create_member(account=alice, email="person@example.com")
    path = link.url.split("://", 1)[1].partition("/")[2]
    password = marked("password")
    with Gunicorn(server_env(database_url()), workers=1) as server:
        browser.get(f"{server.url}/{path}")
        assert "You are person@example.com" in body(browser)
        screenshot(browser, "1-set-password")
        submit(
            browser,
            {"password": "short1", "password_again": "short1"},
            then="This password is too short",
        )
        screenshot(browser, "2-password-refused")
        submit(
            browser, {"password": password, "password_again": password}, then="You are signed in"
        )
        assert "Signed in as person@example.com for the account alice" in body(browser)
        screenshot(browser, "3-signed-in")
        cookies = {cookie["name"]: cookie for cookie in browser.get_cookies()}
        assert cookies["sessionid"]["httpOnly"]
        assert cookies["sessionid"]["sameSite"] == "Lax"

        browser.find_element(By.CSS_SELECTOR, ".who button").click()
        wait_for_url(browser, "/account/login")
        assert "You are signed out." in body(browser)
        screenshot(browser, "4-signed-out")

        submit(
            browser,
            {"email": "person@example.com", "password": marked("wrong")},
            then="The email or the password is wrong.",
        )
        screenshot(browser, "5-wrong-password")

        browser.get(f"{server.url}/account/login?next=/account/")
        submit(
            browser,
            {"email": "Person@Example.com", "password": password},
            then="You are signed in",
        )

        browser.get(f"{server.url}/{path}")
        assert "was used already" in body(browser)
        screenshot(browser, "6-link-used")

        remove_member(account=alice, email="person@example.com")
        browser.get(f"{server.url}/account/")
        assert "/account/login" in browser.current_url
        assert "Sign in to credvault" in body(browser)
