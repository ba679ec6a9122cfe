"""A person in a real browser on credvault's pages: signing in at /account/login with their
email and password, and clicking a decision on an approval page (Chromium, driven by
selenium; the `browser` fixture of tests/conftest.py)."""

from __future__ import annotations

from urllib.parse import quote


def wait_for(browser, selector: str, seconds: float = 15) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, seconds).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, selector))
    )


def wait_for_url(browser, part: str, seconds: float = 15) -> None:
    """Until the page the browser is on has `part` in its URL (a click's navigation)."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, seconds).until(expected_conditions.url_contains(part))


def sign_in(browser, base_url: str, *, email: str, password: str, next_path: str = "") -> None:
    """Type the email and password into the sign-in page and send it; then on `next_path`."""
    from selenium.webdriver.common.by import By

    target = f"{base_url}/account/login" + (f"?next={quote(next_path)}" if next_path else "")
    browser.get(target)
    wait_for(browser, "input[name=email]")
    browser.find_element(By.CSS_SELECTOR, "input[name=email]").send_keys(email)
    browser.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait_for(browser, "main")


def decide(browser, approval_url: str, decision: str) -> str:
    """Open the approval page and click the button of `decision` (`once`, `minutes`, `deny`,
    `approve`); the page's text after it."""
    from selenium.webdriver.common.by import By

    browser.get(approval_url)
    wait_for(browser, f"button[value={decision}]")
    browser.find_element(By.CSS_SELECTOR, f"button[value={decision}]").click()
    wait_for(browser, ".outcome")
    return browser.find_element(By.CSS_SELECTOR, "main").text
