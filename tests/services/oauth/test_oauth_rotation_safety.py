"""OAuth answers cannot lose a rotated token, and a token URL is asked no more than needed:
against the provider stand-in on 127.0.0.1 (tests/support/stand_ins.py, OAuthServer) that rotates
then answers late, answers odd `expires_in` values, fails, and counts its token requests.

- A token answer is stored before anything else can fail: an `expires_in` that is not a
  number, is negative or is over a year is stored as no expiry known (the set is refreshed on
  the next 401), never a 500, at a refresh and at the callback alike.
- A refresh's deadline is its own (CREDVAULT_OAUTH_TIMEOUT), not the verification's.
- After an unavailable token URL, the service's uses answer 503 at once, with no request, for
  CREDVAULT_REFRESH_RETRY_SECONDS: the pause is on the service's row, so every worker and host
  sees it.
- A refresh driven by a 401 happens at most once a minute per service.
- A claim taken after a refusal re-reads the status: `invalid_grant` costs one token request.

The concurrency tests run 16 uses at once on the file-backed SQLite test database, and on
PostgreSQL when DATABASE_URL names one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from services.models import AuditEvent, ConnectedService, ServiceStatus
from services.oauth import refresh as oauth_refresh
from tests.conftest import TEST_AUDIT_KEYS, TEST_KEYS
from tests.support.helpers import (
    PUBLIC_URL,
    agent_token,
    assert_problem,
    call,
    connected_github,
    creds,
    database_url,
    elapsed,
    manage,
    marked,
    opened_set,
    put_agent,
    put_client,
)
from tests.support.stand_ins import OAuthServer

YEAR = 365 * 24 * 3600


@pytest.fixture(autouse=True)
def _refresh_settings(settings) -> None:
    settings.CREDVAULT_OAUTH_TIMEOUT = 5.0
    settings.CREDVAULT_REFRESH_RETRY_SECONDS = 30


@pytest.fixture
def reader(alice_api, stand_in) -> str:
    """An agent token that may read `github`, whose account has a GitHub OAuth client."""
    assert put_client(alice_api, "github", marked("client-secret")).status_code == 201
    grant = [{"service": "github", "access": "read"}]
    assert put_agent(alice_api, "bot", grant).status_code == 201
    return agent_token(alice_api, "bot")


def store_expiring(api, stand_in: OAuthServer, *, seconds: int = 30) -> tuple[str, str]:
    """A set the provider issued, stored as `github`, expiring in `seconds`."""
    access, refresh = stand_in.issue()
    assert refresh is not None
    expires = (timezone.now() + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    response = api.store(
        "github", creds(access_token=access, refresh_token=refresh, expires_at=expires)
    )
    assert response.status_code in (200, 201), response.content
    return access, refresh


def agent_read(token: str):
    return Client(raise_request_exception=False).get(
        "/api/v1/agent/credentials/github", headers={"Authorization": f"Bearer {token}"}
    )


def values_of(response) -> dict[str, str]:
    return {entry["keyName"]: entry["value"] for entry in response.json()["credentials"]}


def stored() -> dict[str, str]:
    return opened_set(ConnectedService.objects.get(service="github"))


def refresh_events() -> list[tuple[str, int, str]]:
    return list(
        AuditEvent.objects.filter(action="oauth.refresh").values_list("outcome", "status", "target")
    )


def concurrently(count: int, use) -> list:
    """`use(index)` in `count` threads released at once, each with its own database
    connection: what each returned."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = use(index)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    return results


# --- the refresh's own deadline ----------------------------------------------------------------


@pytest.mark.django_db
class TestTheRefreshDeadline:
    def test_a_rotation_answered_after_the_verification_deadline_is_stored(
        self, alice_api, stand_in, reader, settings
    ):
        """The provider replaces the refresh token, then answers late: later than a
        verification may take, within the refresh's own deadline. The new set is stored, so
        the connection lives on."""
        settings.CREDVAULT_VERIFY_TIMEOUT = 0.5
        stand_in.rotating = True
        stand_in.stall_after_rotating = 1.5
        _, old_refresh = store_expiring(alice_api, stand_in)
        response = agent_read(reader)
        assert response.status_code == 200, response.content
        assert stand_in.refreshes == 1
        assert old_refresh not in stand_in.refresh_tokens  # the provider rotated it
        assert stored()["refresh_token"] in stand_in.refresh_tokens
        assert values_of(response)["access_token"] in stand_in.access_tokens
        assert refresh_events() == [("success", 200, "")]

    def test_the_refresh_gives_up_at_its_own_deadline(self, alice_api, stand_in, reader, settings):
        settings.CREDVAULT_VERIFY_TIMEOUT = 10.0
        settings.CREDVAULT_OAUTH_TIMEOUT = 0.5
        stand_in.refresh_delay = 3.0
        store_expiring(alice_api, stand_in)
        before = ConnectedService.objects.values("generation", "status").get()
        start = time.monotonic()
        assert_problem(agent_read(reader), 503, "provider_unavailable")
        assert elapsed(start) < 2.5
        assert ConnectedService.objects.values("generation", "status").get() == before


@pytest.mark.django_db(transaction=True)
def test_sixteen_uses_of_a_late_rotation_keep_the_rotated_token(
    alice_api, stand_in, reader, settings
):
    """16 uses at once while the one refresh rotates, then answers after the verification
    deadline: every use gets the new set, and the stored refresh token is the live one."""
    settings.CREDVAULT_VERIFY_TIMEOUT = 0.5
    stand_in.rotating = True
    stand_in.stall_after_rotating = 1.5
    store_expiring(alice_api, stand_in)

    def use(_: int) -> tuple[int, str]:
        response = agent_read(reader)
        value = values_of(response)["access_token"] if response.status_code == 200 else ""
        return response.status_code, value

    results = concurrently(16, use)
    assert Counter(status for status, _ in results) == {200: 16}, results
    assert stand_in.refreshes == 1
    assert len({value for _, value in results}) == 1
    assert stored()["refresh_token"] in stand_in.refresh_tokens
    assert ConnectedService.objects.get().status == ServiceStatus.CONNECTED


# --- expires_in --------------------------------------------------------------------------------

# JSON texts of `expires_in` that say nothing usable: not a number, negative, over a year.
UNUSABLE = [
    "1e12",
    "1e400",
    "-1e400",
    "1" + "0" * 400,
    "-5",
    "31536001",
    "NaN",
    "Infinity",
    "true",
    "null",
    '"soon"',
    '"1e400"',
    '""',
    "[3600]",
    '{"seconds": 3600}',
]
# And usable ones: the seconds each gives.
USABLE = [
    ("3600", 3600),
    ("3599.9", 3599),
    ('"7200"', 7200),  # a form-encoded answer (GitHub's) holds only strings
    ("31536000", YEAR),
    ("0", 0),
]


def expires_in_seconds(fields: dict[str, str]) -> float:
    expires_at = timezone.datetime.fromisoformat(fields["expires_at"].replace("Z", "+00:00"))
    return (expires_at - timezone.now()).total_seconds()


@pytest.mark.django_db
class TestExpiresIn:
    @pytest.mark.parametrize("raw", UNUSABLE)
    def test_an_unusable_expires_in_of_a_refresh_is_stored_as_no_expiry(
        self, alice_api, stand_in, reader, raw
    ):
        stand_in.rotating = True
        stand_in.raw_expires_in = raw
        store_expiring(alice_api, stand_in)
        response = agent_read(reader)
        assert response.status_code == 200, response.content
        fields = stored()
        assert "expires_at" not in fields
        assert fields["refresh_token"] in stand_in.refresh_tokens  # the rotated one
        assert values_of(response)["access_token"] == fields["access_token"]
        assert refresh_events() == [("success", 200, "")]

    @pytest.mark.parametrize(("raw", "seconds"), USABLE)
    def test_a_usable_expires_in_of_a_refresh_sets_the_expiry(
        self, alice_api, stand_in, reader, raw, seconds
    ):
        stand_in.raw_expires_in = raw
        store_expiring(alice_api, stand_in)
        assert agent_read(reader).status_code == 200
        assert expires_in_seconds(stored()) == pytest.approx(seconds, abs=5)

    @pytest.mark.parametrize("raw", UNUSABLE)
    def test_an_unusable_expires_in_at_the_callback_connects_with_no_expiry(
        self, alice_api, stand_in, reader, raw
    ):
        stand_in.raw_expires_in = raw
        assert "GitHub is connected" in connected_github(alice_api, stand_in)
        fields = stored()
        assert "expires_at" not in fields
        assert fields["access_token"] in stand_in.access_tokens
        event = AuditEvent.objects.get(action="oauth.callback")
        assert (event.outcome, event.status) == ("success", 201)

    def test_a_set_with_no_known_expiry_is_refreshed_on_the_next_401(
        self, alice_api, stand_in, reader
    ):
        stand_in.raw_expires_in = "1e400"
        connected_github(alice_api, stand_in)
        assert agent_read(reader).status_code == 200
        assert stand_in.token_requests[-1].form["grant_type"] == "authorization_code"
        stand_in.revoke_access()  # the provider no longer takes the access token
        response = call(reader, "GET", "github", "/user")
        assert response.status_code == 200, response.content
        assert stand_in.refreshes == 1
        assert [r["token"] in stand_in.access_tokens for r in stand_in.api_requests] == [
            False,
            True,
        ]


# --- an unavailable token URL ----------------------------------------------------------------


@pytest.mark.django_db
class TestAnUnavailableTokenUrl:
    def test_the_next_uses_answer_503_at_once_without_a_request(self, alice_api, stand_in, reader):
        stand_in.refresh_mode = "unavailable"
        store_expiring(alice_api, stand_in)
        before = ConnectedService.objects.values("generation", "status").get()
        assert_problem(agent_read(reader), 503, "provider_unavailable")
        assert len(stand_in.token_requests) == 1
        for _ in range(5):
            # At once: the token URL is not asked again (a wall-clock bound would only
            # measure the machine's load).
            response = agent_read(reader)
            assert len(stand_in.token_requests) == 1
            body = assert_problem(response, 503, "provider_unavailable")
            assert 1 <= int(response["Retry-After"]) <= 30
            assert "tries again after" in body["detail"]
        proxied = call(reader, "GET", "github", "/user")
        assert_problem(proxied, 503, "provider_unavailable")
        assert stand_in.api_requests == []
        assert len(stand_in.token_requests) == 1
        assert ConnectedService.objects.values("generation", "status").get() == before
        # One event for the one request made.
        assert refresh_events() == [("error", 503, "unavailable")]

    def test_after_the_pause_a_use_asks_again(self, alice_api, stand_in, reader, settings):
        settings.CREDVAULT_REFRESH_RETRY_SECONDS = 1
        stand_in.refresh_mode = "unavailable"
        store_expiring(alice_api, stand_in)
        assert_problem(agent_read(reader), 503, "provider_unavailable")
        assert_problem(agent_read(reader), 503, "provider_unavailable")
        assert len(stand_in.token_requests) == 1
        time.sleep(1.1)
        stand_in.refresh_mode = "ok"
        response = agent_read(reader)
        assert response.status_code == 200, response.content
        assert len(stand_in.token_requests) == 2
        assert values_of(response)["access_token"] in stand_in.access_tokens


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_pause_holds_for_another_process(alice_api, stand_in, reader, settings):
    """The pause is on the service's row: `refresh_tokens` in a process of its own (another
    worker, another host) answers provider_unavailable without asking the token URL."""
    stand_in.refresh_mode = "unavailable"
    store_expiring(alice_api, stand_in)
    assert_problem(agent_read(reader), 503, "provider_unavailable")
    assert len(stand_in.token_requests) == 1
    result = manage(
        "refresh_tokens",
        DATABASE_URL=database_url(),
        CREDVAULT_ENCRYPTION_KEYS=TEST_KEYS,
        CREDVAULT_AUDIT_KEYS=TEST_AUDIT_KEYS,
        CREDVAULT_PROVIDER_OAUTH_URLS=settings.CREDVAULT_PROVIDER_OAUTH_URLS,
        CREDVAULT_PUBLIC_URL=PUBLIC_URL,
    )
    assert result.returncode != 0
    assert "alice/github: provider_unavailable" in result.stderr, result.stderr
    assert len(stand_in.token_requests) == 1


@pytest.mark.django_db(transaction=True)
def test_sixteen_uses_while_the_token_url_fails_make_one_request(alice_api, stand_in, reader):
    stand_in.refresh_mode = "unavailable"
    stand_in.refresh_delay = 0.3  # every use arrives while the one request runs
    store_expiring(alice_api, stand_in)
    results = concurrently(16, lambda _: agent_read(reader).status_code)
    assert Counter(results) == {503: 16}, results
    assert len(stand_in.token_requests) == 1


# --- a refresh driven by a 401 ---------------------------------------------------------------


@pytest.mark.django_db
class TestA401DrivenRefresh:
    def test_a_path_that_answers_401_refreshes_at_most_once_a_minute(
        self, alice_api, stand_in, reader
    ):
        """The provider refuses every access token the call brings (a path that answers 401
        whatever the token): the first call refreshes and retries; the calls of the next
        minute get the provider's 401, with no token request."""
        store_expiring(alice_api, stand_in, seconds=3600)
        stand_in.revoke_access()
        assert call(reader, "GET", "github", "/user").status_code == 200
        assert stand_in.refreshes == 1
        generation = ConnectedService.objects.get().generation
        for _ in range(4):
            stand_in.revoke_access()
            response = call(reader, "GET", "github", "/user")
            assert response.status_code == 401
            assert b"Bad credentials" in response.content
        assert stand_in.refreshes == 1
        assert len(stand_in.token_requests) == 1
        # Each of those calls asked the provider once: with no fresh token, no retry.
        assert len(stand_in.api_requests) == 2 + 4
        assert ConnectedService.objects.get().generation == generation
        assert alice_api.list().json()[0]["status"] == "connected"

    def test_a_minute_later_a_401_refreshes_again(self, alice_api, stand_in, reader):
        store_expiring(alice_api, stand_in, seconds=3600)
        stand_in.revoke_access()
        assert call(reader, "GET", "github", "/user").status_code == 200
        stand_in.revoke_access()
        assert call(reader, "GET", "github", "/user").status_code == 401
        ConnectedService.objects.update(forced_refresh_at=timezone.now() - timedelta(seconds=61))
        stand_in.revoke_access()
        assert call(reader, "GET", "github", "/user").status_code == 200
        assert stand_in.refreshes == 2

    def test_a_401_does_not_hold_back_a_refresh_ahead_of_expiry(self, alice_api, stand_in, reader):
        """The minute is for refreshes a 401 asks for: a set about to expire is refreshed all
        the same."""
        store_expiring(alice_api, stand_in, seconds=3600)
        stand_in.revoke_access()
        assert call(reader, "GET", "github", "/user").status_code == 200
        stand_in.expires_in = 30  # the next set expires within the refresh window
        store_expiring(alice_api, stand_in, seconds=30)
        assert agent_read(reader).status_code == 200
        assert stand_in.refreshes == 2


@pytest.mark.django_db(transaction=True)
def test_sixteen_calls_answered_401_cause_one_refresh(alice_api, stand_in, reader, settings):
    settings.CREDVAULT_PROXY_MAX_CONCURRENT = 16
    store_expiring(alice_api, stand_in, seconds=3600)
    stand_in.revoke_access()
    stand_in.refresh_delay = 0.3
    results = concurrently(16, lambda _: call(reader, "GET", "github", "/user").status_code)
    assert stand_in.refreshes == 1
    assert Counter(results) == {200: 16}, results


# --- a refused grant costs one request -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_sixteen_uses_of_a_refused_grant_make_one_request(alice_api, stand_in, reader):
    stand_in.refresh_mode = "invalid_grant"
    stand_in.refresh_delay = 0.3
    store_expiring(alice_api, stand_in)
    results = concurrently(16, lambda _: agent_read(reader).status_code)
    assert Counter(results) == {409: 16}, results
    assert len(stand_in.token_requests) == 1
    assert refresh_events() == [("refused", 409, "invalid_grant")]


@pytest.mark.django_db(transaction=True)
def test_a_claim_taken_after_the_refusal_rereads_the_status(
    alice_api, stand_in, reader, monkeypatch
):
    """The race, made certain: a second use reads the service (connected, claimed by the
    first), and tries to take the claim only once the first has marked the service
    `reauthorization_required` and let the claim go. It must not ask the token URL again."""
    stand_in.refresh_mode = "invalid_grant"
    stand_in.refresh_delay = 0.5
    store_expiring(alice_api, stand_in)
    real_claim = oauth_refresh._claim

    def late_claim(*args, **kwargs):
        if threading.current_thread().name == "late":
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                status = ConnectedService.objects.values_list("status", flat=True).get()
                if status == ServiceStatus.REAUTHORIZATION_REQUIRED:
                    break
                time.sleep(0.02)
        return real_claim(*args, **kwargs)

    monkeypatch.setattr(oauth_refresh, "_claim", late_claim)
    results: dict[str, int] = {}

    def use(name: str) -> None:
        try:
            results[name] = agent_read(reader).status_code
        finally:
            connection.close()

    first = threading.Thread(target=use, args=("first",), name="first")
    first.start()
    deadline = time.monotonic() + 10
    while not ConnectedService.objects.filter(refreshing_until__isnull=False).exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    late = threading.Thread(target=use, args=("late",), name="late")
    late.start()
    first.join(timeout=30)
    late.join(timeout=30)
    assert results == {"first": 409, "late": 409}
    assert len(stand_in.token_requests) == 1
