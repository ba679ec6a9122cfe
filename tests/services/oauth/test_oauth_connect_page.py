"""The connect link is bound to a browser: `authorizeUrl` is credvault's own start page, which
names the provider and the account and asks the person to continue; continuing (a POST from
that page, and only from it) sets an HttpOnly, SameSite=Lax cookie bound to the state and sends
the browser to the provider; the callback refuses a state whose browser does not bring that
cookie. Against the OAuth stand-in on 127.0.0.1 (the `stand_in` fixture), with Django's test
client as the browser here, and headless Chromium in tests/browser/test_oauth_browser.py.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from services.models import AuditEvent, ConnectedService, OAuthState
from tests.support.helpers import CLIENT_ID, PUBLIC_URL, connect, consent, marked, put_client
from tests.support.stand_ins import OAuthServer


@pytest.fixture
def client_secret(alice_api, stand_in) -> str:
    secret = marked("client-secret")
    assert put_client(alice_api, "github", secret).status_code == 201
    return secret


def start_link(api, provider: str = "github", body: dict | None = None) -> str:
    response = connect(api, provider, body)
    assert response.status_code == 201, response.content
    return response.json()["authorizeUrl"]


def provider_consents(stand_in: OAuthServer, authorize_url: str) -> dict[str, str]:
    """What the provider sends the browser back with (`state`, `code`)."""
    back = consent(stand_in, authorize_url)
    del back["cookie"]
    return back


class Browser:
    """One person's browser: one cookie jar from the start page to the callback."""

    def __init__(self) -> None:
        self.client = Client(raise_request_exception=False)

    def open(self, link: str):
        return self.client.get(urlsplit(link).path)

    def continue_from(self, link: str, **headers: str):
        """The start page's button: a form POST to the page itself, which a current browser
        marks `Sec-Fetch-Site: same-origin`."""
        sent = headers if headers else {"Sec-Fetch-Site": "same-origin"}
        return self.client.post(urlsplit(link).path, headers=sent)

    def consent(self, stand_in: OAuthServer, link: str) -> dict[str, str]:
        """Open the link, continue, consent at the provider: the callback's parameters."""
        page = self.open(link)
        assert page.status_code == 200, page.content
        continued = self.continue_from(link)
        assert continued.status_code == 303, continued.content
        return provider_consents(stand_in, continued["Location"])

    def callback(self, **params: str):
        return self.client.get("/oauth/callback", params)


def state_of(location: str) -> str:
    return parse_qs(urlsplit(location).query)["state"][0]


# --- the start page --------------------------------------------------------------------------


@pytest.mark.django_db
class TestTheStartPage:
    def test_the_link_is_credvaults_start_page_and_holds_no_state(
        self, alice_api, stand_in, client_secret
    ):
        link = start_link(alice_api)
        assert link.startswith(f"{PUBLIC_URL}/oauth/start/")
        start_id = link.removeprefix(f"{PUBLIC_URL}/oauth/start/")
        assert len(start_id) >= 40
        assert "?" not in link
        row = OAuthState.objects.get()
        assert row.start_digest == hashlib.sha256(start_id.encode()).hexdigest()
        assert row.digest != row.start_digest  # the id is not the state
        assert row.browser_digest == ""
        assert start_id not in json.dumps(list(OAuthState.objects.values()), default=str)
        assert stand_in.token_requests == []

    def test_the_page_names_the_provider_the_account_and_the_service(
        self, alice_api, stand_in, client_secret
    ):
        link = start_link(alice_api, body={"service": "GitHub Work", "scopes": ["repo"]})
        page = Browser().open(link)
        assert page.status_code == 200
        text = page.content.decode()
        assert "Connect GitHub to credvault" in text
        assert "<strong>alice</strong>" in text
        assert "<strong>github-work</strong>" in text
        assert "<code>repo</code>" in text
        assert "Continue to GitHub" in text
        assert "If someone sent you this link, close this window." in text
        assert '<form method="post">' in text  # to the page itself: the id is not on it

    def test_the_page_holds_no_value_is_not_cached_and_loads_nothing(
        self, alice_api, stand_in, client_secret
    ):
        link = start_link(alice_api)
        page = Browser().open(link)
        text = page.content.decode()
        start_id = link.rsplit("/", 1)[1]
        for value in (start_id, client_secret, CLIENT_ID):
            assert value not in text
        assert "state" not in text
        assert "<script" not in text
        assert page["Cache-Control"] == "no-store"
        assert page["Content-Security-Policy"] == (
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
            f"form-action 'self' {stand_in.url}; frame-ancestors 'none'"
        )
        assert page["X-Frame-Options"] == "DENY"
        # Not no-referrer: a browser without Sec-Fetch-Site must send the form's Origin.
        assert page["Referrer-Policy"] == "same-origin"
        assert page.cookies == {}
        assert OAuthState.objects.get().browser_digest == ""

    @pytest.mark.parametrize("method", ["GET", "POST"])
    def test_an_unknown_link_is_a_400_page(self, alice_api, stand_in, client_secret, method):
        start_link(alice_api)
        browser = Browser()
        link = f"{PUBLIC_URL}/oauth/start/made-up"
        page = browser.open(link) if method == "GET" else browser.continue_from(link)
        assert page.status_code == 400
        assert "unknown" in page.content.decode()
        assert page["Cache-Control"] == "no-store"
        assert "form-action 'none'" in page["Content-Security-Policy"]
        assert "Set-Cookie" not in page.headers

    def test_an_expired_link_is_a_400_page(self, alice_api, stand_in, client_secret):
        link = start_link(alice_api)
        OAuthState.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        browser = Browser()
        for page in (browser.open(link), browser.continue_from(link)):
            assert page.status_code == 400
            assert "expired" in page.content.decode()
        assert OAuthState.objects.get().browser_digest == ""


@pytest.mark.django_db
class TestContinuing:
    def test_continuing_binds_the_browser_and_sends_it_to_the_provider(
        self, alice_api, stand_in, client_secret
    ):
        link = start_link(alice_api)
        continued = Browser().continue_from(link)
        assert continued.status_code == 303
        location = continued["Location"]
        url = urlsplit(location)
        assert f"{url.scheme}://{url.netloc}{url.path}" == f"{stand_in.url}/authorize"
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert query["client_id"] == CLIENT_ID
        assert query["redirect_uri"] == f"{PUBLIC_URL}/oauth/callback"
        assert query["code_challenge_method"] == "S256"
        state = query["state"]
        assert state != link.rsplit("/", 1)[1]
        row = OAuthState.objects.get()
        assert row.digest == hashlib.sha256(state.encode()).hexdigest()
        [(name, cookie)] = continued.cookies.items()
        assert name == f"credvault_connect_{row.digest[:16]}"
        assert cookie["httponly"] is True
        assert cookie["samesite"] == "Lax"
        assert cookie["path"] == "/"
        assert 590 <= int(cookie["max-age"]) <= 600
        assert not cookie["secure"]  # plain http here; see the https test
        assert cookie.value not in (state, link)
        assert row.browser_digest == hashlib.sha256(cookie.value.encode()).hexdigest()
        assert continued["Referrer-Policy"] == "no-referrer"
        assert continued["Cache-Control"] == "no-store"
        assert client_secret not in location
        event = AuditEvent.objects.filter(action="oauth.connect").order_by("seq").last()
        assert (event.status, event.target, event.token_prefix) == (303, "continued", "browser")
        assert stand_in.token_requests == []

    def test_over_https_the_cookie_is_secure_and_for_this_host_only(
        self, alice_api, stand_in, client_secret, settings
    ):
        settings.CREDVAULT_PUBLIC_URL = "https://vault.example.com"
        link = start_link(alice_api)
        assert link.startswith("https://vault.example.com/oauth/start/")
        browser = Browser()
        continued = browser.client.post(
            urlsplit(link).path, headers={"Sec-Fetch-Site": "same-origin"}, secure=True
        )
        assert continued.status_code == 303
        [(name, cookie)] = continued.cookies.items()
        assert name.startswith("__Host-credvault_connect_")
        assert cookie["secure"] is True
        assert cookie["path"] == "/"
        assert not cookie["domain"]
        back = provider_consents(stand_in, continued["Location"])
        page = browser.client.get("/oauth/callback", back, secure=True)
        assert page.status_code == 200, page.content
        assert ConnectedService.objects.filter(service="github").exists()

    def test_a_link_continues_once(self, alice_api, stand_in, client_secret):
        link = start_link(alice_api)
        assert Browser().continue_from(link).status_code == 303
        other = Browser()
        for page in (other.continue_from(link), other.open(link)):
            assert page.status_code == 400
            assert "used already" in page.content.decode()
            assert "Set-Cookie" not in page.headers

    @pytest.mark.parametrize(
        "headers",
        [
            {"Sec-Fetch-Site": "cross-site"},
            # Another origin of the same site (another port, a sibling subdomain) is refused
            # too: SameSite would not tell them apart.
            {"Sec-Fetch-Site": "same-site"},
            {"Sec-Fetch-Site": "none"},
            {"Sec-Fetch-Site": "cross-site", "Origin": PUBLIC_URL},
            {"Origin": "https://evil.example"},
            {"Origin": "http://testserver:8443"},
            {"Origin": "null"},
            {"Referer": f"{PUBLIC_URL}/oauth/start/x"},  # no Origin, no Sec-Fetch-Site
        ],
    )
    def test_another_sites_submission_is_refused(self, alice_api, stand_in, client_secret, headers):
        """A page of another site submits a form to the start page in the person's browser,
        to bind that site's connect to the person: refused, no cookie, nowhere sent, and the
        link still works from its own page."""
        link = start_link(alice_api)
        browser = Browser()
        refused = browser.client.post(urlsplit(link).path, headers=headers)
        assert refused.status_code == 403
        assert "only from its own page" in refused.content.decode()
        assert "Location" not in refused.headers
        assert "Set-Cookie" not in refused.headers
        assert refused["Content-Security-Policy"].startswith("default-src 'none'")
        assert OAuthState.objects.get().browser_digest == ""
        event = AuditEvent.objects.filter(action="oauth.connect").order_by("seq").last()
        assert (event.status, event.target, event.outcome) == (403, "other_site", "refused")
        assert browser.continue_from(link).status_code == 303

    def test_a_browser_without_sec_fetch_site_is_known_by_its_origin(
        self, alice_api, stand_in, client_secret
    ):
        link = start_link(alice_api)
        continued = Browser().continue_from(link, Origin=PUBLIC_URL)
        assert continued.status_code == 303

    def test_a_get_never_continues(self, alice_api, stand_in, client_secret):
        link = start_link(alice_api)
        for _ in range(2):
            page = Browser().client.get(urlsplit(link).path, {"continue": "1"})
            assert page.status_code == 200
            assert "Set-Cookie" not in page.headers
        assert OAuthState.objects.get().browser_digest == ""

    def test_the_clients_removal_meanwhile_is_said(self, alice_api, stand_in, client_secret):
        link = start_link(alice_api)
        assert alice_api.raw("DELETE", "/api/v1/oauth-clients/github").status_code == 204
        page = Browser().continue_from(link)
        assert page.status_code == 409
        assert "OAuth client of GitHub was removed" in page.content.decode()


# --- the callback wants the browser that continued -------------------------------------------


@pytest.mark.django_db
class TestTheCallbackWantsItsBrowser:
    def test_a_state_without_its_cookie_is_refused_and_sends_nothing(
        self, alice_api, stand_in, client_secret
    ):
        """The provider's redirect, with a valid state and code, opened in a browser that did
        not continue the connect (an attacker's connect sent to a victim): a 400 page,
        nothing sent, nothing stored; the browser that continued can still finish."""
        link = start_link(alice_api)
        person = Browser()
        back = person.consent(stand_in, link)
        page = Browser().callback(**back)
        assert page.status_code == 400
        text = page.content.decode()
        assert "This browser did not continue this connection" in text
        assert "Nothing was stored" in text
        assert stand_in.token_requests == []
        assert not ConnectedService.objects.exists()
        event = AuditEvent.objects.get(action="oauth.callback")
        assert (event.status, event.target, event.outcome) == (400, "other_browser", "refused")
        finished = person.callback(**back)
        assert finished.status_code == 200, finished.content
        assert "GitHub is connected" in finished.content.decode()

    def test_a_wrong_cookie_is_refused(self, alice_api, stand_in, client_secret):
        person = Browser()
        back = person.consent(stand_in, start_link(alice_api))
        [name] = person.client.cookies.keys()
        other = Browser()
        other.client.cookies[name] = "guessed"
        assert other.callback(**back).status_code == 400
        assert stand_in.token_requests == []

    def test_two_connects_in_one_browser_keep_their_own_cookies(
        self, alice_api, stand_in, client_secret
    ):
        assert put_client(alice_api, "slack", marked("slack-secret")).status_code == 201
        browser = Browser()
        github = browser.consent(stand_in, start_link(alice_api))
        slack = browser.consent(stand_in, start_link(alice_api, "slack"))
        assert len(browser.client.cookies) == 2
        # Each cookie is bound to its own state: swapped, neither works.
        cookies = dict(browser.client.cookies.items())
        swapped = Browser()
        names = list(cookies)
        swapped.client.cookies[names[0]] = cookies[names[1]].value
        swapped.client.cookies[names[1]] = cookies[names[0]].value
        assert swapped.callback(**github).status_code == 400
        assert swapped.callback(**slack).status_code == 400
        assert browser.callback(**slack).status_code == 200
        assert browser.callback(**github).status_code == 200
        assert sorted(ConnectedService.objects.values_list("service", flat=True)) == [
            "github",
            "slack",
        ]

    def test_the_callback_forgets_the_cookie(self, alice_api, stand_in, client_secret):
        browser = Browser()
        back = browser.consent(stand_in, start_link(alice_api))
        [name] = browser.client.cookies.keys()
        page = browser.callback(**back)
        assert page.status_code == 200
        assert page.cookies[name]["max-age"] == 0
        assert page.cookies[name].value == ""

    def test_no_value_in_any_page_cookie_or_event(self, alice_api, stand_in, client_secret):
        browser = Browser()
        link = start_link(alice_api)
        pages = [browser.open(link)]
        continued = browser.continue_from(link)
        back = provider_consents(stand_in, continued["Location"])
        pages.append(browser.callback(**back))
        seen = "".join(p.content.decode() for p in pages) + str(continued.cookies)
        events = json.dumps(list(AuditEvent.objects.values()), default=str)
        for value in stand_in.access_tokens | stand_in.refresh_tokens | {client_secret}:
            assert value not in seen
            assert value not in events
        assert state_of(continued["Location"]) not in seen + events
        assert link.rsplit("/", 1)[1] not in events
