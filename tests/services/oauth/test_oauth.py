"""OAuth against a real provider stand-in on 127.0.0.1 (tests/support/stand_ins.py, OAuthServer):
clients, connect and callback, refresh on use, the failure classes, `refresh_tokens`."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import logging
import threading
from collections import Counter
from datetime import timedelta
from io import StringIO
from urllib.parse import parse_qs, urlsplit

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection
from django.test import Client
from django.utils import timezone

from services import audit
from services.audit import Operation
from services.keys import envelope
from services.models import AuditEvent, ConnectedService, OAuthClient, OAuthState
from services.oauth import refresh as oauth_refresh
from services.oauth.expiring import due_sets
from tests.support.helpers import (
    CLIENT_ID,
    PUBLIC_URL,
    agent_token,
    assert_problem,
    call,
    callback,
    connect,
    connected_github,
    consent,
    creds,
    follow,
    marked,
    opened_set,
    put_agent,
    put_client,
)


@pytest.fixture
def client_secret(alice_api):
    secret = marked("client-secret")
    response = put_client(alice_api, "github", secret)
    assert response.status_code == 201, response.content
    return secret


@pytest.mark.django_db
@pytest.mark.usefixtures("each_key_manager")
class TestClients:
    def test_the_secret_is_sealed_and_never_returned(self, alice_api, stand_in):
        secret = marked("client-secret")
        assert put_client(alice_api, "github", secret).status_code == 201
        assert put_client(alice_api, "github", secret, client_id="other").status_code == 200
        listed = alice_api.raw("GET", "/api/v1/oauth-clients")
        assert listed.status_code == 200
        [entry] = listed.json()
        assert entry["provider"] == "github"
        assert entry["clientId"] == "other"
        assert set(entry) == {"provider", "clientId", "createdAt"}
        assert secret not in listed.content.decode()
        row = OAuthClient.objects.get()
        assert secret.encode() not in bytes(row.secret_ciphertext)
        assert secret not in repr(row)
        assert secret not in str(row)
        assert alice_api.raw("DELETE", "/api/v1/oauth-clients/github").status_code == 204
        assert_problem(
            alice_api.raw("DELETE", "/api/v1/oauth-clients/github"), 404, "oauth_client_not_found"
        )

    def test_a_provider_without_oauth_is_refused(self, alice_api, stand_in):
        assert_problem(put_client(alice_api, "openai", "x"), 404, "oauth_not_supported")
        assert not OAuthClient.objects.exists()


@pytest.mark.django_db
class TestConnect:
    def test_the_authorize_urls_parameters(self, alice_api, stand_in, client_secret):
        response = connect(alice_api)
        assert response.status_code == 201
        authorize_url, _ = follow(response.json()["authorizeUrl"])
        url = urlsplit(authorize_url)
        assert f"{url.scheme}://{url.netloc}{url.path}" == f"{stand_in.url}/authorize"
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert query["response_type"] == "code"
        assert query["client_id"] == CLIENT_ID
        assert query["redirect_uri"] == f"{PUBLIC_URL}/oauth/callback"
        assert query["code_challenge_method"] == "S256"
        assert len(query["state"]) >= 40
        assert "scope" in query
        assert client_secret not in authorize_url
        state = OAuthState.objects.get()
        assert state.digest == hashlib.sha256(query["state"].encode()).hexdigest()
        assert query["state"] not in json.dumps(list(OAuthState.objects.values()), default=str)

    def test_the_code_exchange_as_the_provider_receives_it(
        self, alice_api, stand_in, client_secret
    ):
        url, cookie = follow(connect(alice_api).json()["authorizeUrl"])
        challenge = parse_qs(urlsplit(url).query)["code_challenge"][0]
        page = callback(**consent(stand_in, url, cookie=cookie))
        assert page.status_code == 200
        [exchange] = stand_in.token_requests
        form = exchange.form
        assert form["grant_type"] == "authorization_code"
        assert form["redirect_uri"] == f"{PUBLIC_URL}/oauth/callback"
        verifier = form["code_verifier"]
        digest = hashlib.sha256(verifier.encode()).digest()
        assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == challenge
        # GitHub: the client authenticates in the form (client_secret_post).
        assert form["client_id"] == CLIENT_ID
        assert form["client_secret"] == client_secret
        assert "authorization" not in exchange.headers

    def test_client_secret_basic(self, alice_api, stand_in):
        secret = marked("zoom-secret")
        assert put_client(alice_api, "zoom", secret).status_code == 201
        url = connect(alice_api, "zoom").json()["authorizeUrl"]
        assert callback(**consent(stand_in, url)).status_code == 200
        [exchange] = stand_in.token_requests
        assert "client_secret" not in exchange.form
        pair = base64.b64decode(exchange.headers["authorization"].removeprefix("Basic "))
        assert pair.decode() == f"{CLIENT_ID}:{secret}"

    def test_the_whole_flow_stores_the_set_and_says_so(self, alice_api, stand_in, client_secret):
        page = connected_github(alice_api, stand_in)
        assert "GitHub is connected" in page
        service = ConnectedService.objects.get(service="github")
        stored = opened_set(service)
        assert set(stored) >= {"access_token", "refresh_token", "expires_at", "token_type"}
        assert stored["access_token"] in stand_in.access_tokens
        for value in stored.values():
            if value.startswith("MARKED-SECRET"):
                assert value not in page
        assert alice_api.list().json()[0]["status"] == "connected"
        actions = list(AuditEvent.objects.values_list("action", "outcome"))
        assert ("oauth.callback", "success") in actions
        assert ("oauth.connect", "success") in actions

    def test_the_page_is_not_cached_and_loads_nothing(self, alice_api, stand_in, client_secret):
        url = connect(alice_api).json()["authorizeUrl"]
        page = callback(**consent(stand_in, url))
        assert page["Cache-Control"] == "no-store"
        assert "default-src 'none'" in page["Content-Security-Policy"]
        assert "<script" not in page.content.decode()

    def test_a_replayed_state_is_refused_with_nothing_more_stored(
        self, alice_api, stand_in, client_secret
    ):
        url = connect(alice_api).json()["authorizeUrl"]
        back = consent(stand_in, url)
        assert callback(**back).status_code == 200
        generation = ConnectedService.objects.get().generation
        again = callback(**back)
        assert again.status_code == 400
        assert "unknown or was used" in again.content.decode()
        assert ConnectedService.objects.get().generation == generation
        assert len(stand_in.token_requests) == 1

    def test_an_unknown_state_sends_nothing(self, alice_api, stand_in, client_secret):
        page = callback(state="made-up", code="code-1")
        assert page.status_code == 400
        assert stand_in.token_requests == []
        assert not ConnectedService.objects.exists()

    def test_an_expired_state_sends_nothing(self, alice_api, stand_in, client_secret):
        url, cookie = follow(connect(alice_api).json()["authorizeUrl"])
        OAuthState.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        page = callback(**consent(stand_in, url, cookie=cookie))
        assert page.status_code == 400
        assert "expired" in page.content.decode()
        assert stand_in.token_requests == []
        assert not ConnectedService.objects.exists()

    def test_another_accounts_state_stores_for_that_account_only(
        self, alice_api, bob_api, stand_in, client_secret
    ):
        """The state binds the account: whoever's browser brings it back, the set goes to the
        account that started the connect, never to another."""
        url = connect(alice_api).json()["authorizeUrl"]
        assert callback(**consent(stand_in, url)).status_code == 200
        assert bob_api.list().json() == []
        assert [s["service"] for s in alice_api.list().json()] == ["github"]

    def test_the_providers_error_is_shown_and_nothing_stored(
        self, alice_api, stand_in, client_secret
    ):
        back = consent(stand_in, connect(alice_api).json()["authorizeUrl"])
        page = callback(state=back["state"], cookie=back["cookie"], error="access_denied")
        assert page.status_code == 400
        assert "access_denied" in page.content.decode()
        assert stand_in.token_requests == []
        assert not ConnectedService.objects.exists()

    def test_a_provider_without_pkce_is_sent_neither_challenge_nor_verifier(
        self, alice_api, stand_in
    ):
        """Slack's entry says no PKCE: its authorization URL carries no code_challenge and
        its code exchange no code_verifier, and the connection is made."""
        assert put_client(alice_api, "slack", marked("slack-secret")).status_code == 201
        url, cookie = follow(connect(alice_api, "slack").json()["authorizeUrl"])
        query = parse_qs(urlsplit(url).query)
        assert "code_challenge" not in query
        assert "code_challenge_method" not in query
        assert callback(**consent(stand_in, url, cookie=cookie)).status_code == 200
        [exchange] = stand_in.token_requests
        assert exchange.form["grant_type"] == "authorization_code"
        assert "code_verifier" not in exchange.form
        assert ConnectedService.objects.get().service == "slack"

    def test_a_provider_with_pkce_gets_the_s256_challenge_and_its_verifier(
        self, alice_api, stand_in, client_secret
    ):
        url, cookie = follow(connect(alice_api).json()["authorizeUrl"])
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        assert query["code_challenge_method"] == "S256"
        assert callback(**consent(stand_in, url, cookie=cookie)).status_code == 200
        [exchange] = stand_in.token_requests
        digest = hashlib.sha256(exchange.form["code_verifier"].encode()).digest()
        assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == query["code_challenge"]

    def test_a_refused_client_at_the_exchange_says_misconfigured(
        self, alice_api, stand_in, client_secret
    ):
        stand_in.exchange_error = (200, "incorrect_client_credentials")
        url = connect(alice_api).json()["authorizeUrl"]
        page = callback(**consent(stand_in, url))
        assert page.status_code == 409
        text = page.content.decode()
        assert "OAuth client is misconfigured" in text
        assert "incorrect_client_credentials" in text
        assert client_secret not in text
        assert not ConnectedService.objects.exists()

    @pytest.mark.parametrize(
        ("exchange_error", "status", "detail"),
        [
            ((503, "server_error"), 502, "unavailable"),
            ((200, "incorrect_client_credentials"), 409, "incorrect_client_credentials"),
            ((400, "invalid_grant"), 400, "invalid_grant"),
        ],
    )
    def test_the_page_and_its_audit_event_say_one_status(
        self, alice_api, stand_in, client_secret, exchange_error, status, detail
    ):
        """A failed exchange answers the status its audit event records: a token URL that
        cannot be reached is 502 on the page and in the event alike."""
        stand_in.exchange_error = exchange_error
        page = callback(**consent(stand_in, connect(alice_api).json()["authorizeUrl"]))
        event = AuditEvent.objects.get(action="oauth.callback")
        assert (page.status_code, event.status, event.target) == (status, status, detail)
        assert not ConnectedService.objects.exists()

    def test_a_failed_callback_is_written_by_the_one_recorder_of_refusals(
        self, alice_api, stand_in, client_secret, monkeypatch, caplog
    ):
        """The callback's failure goes through `audit.record_refusal`: when its event cannot be
        written, the person is still told why (a log line says the event is missing)."""
        url = connect(alice_api).json()["authorizeUrl"]
        back = consent(stand_in, url)
        refusals = []
        record_refusal = audit.record_refusal
        monkeypatch.setattr(
            audit,
            "record_refusal",
            lambda *a, **k: refusals.append((a[1], k["status"])) or record_refusal(*a, **k),
        )

        def unwritable(*args, **kwargs):
            raise DatabaseError("the audit table is locked")

        monkeypatch.setattr(audit, "record", unwritable)
        with caplog.at_level(logging.ERROR, logger="credvault.audit"):
            page = callback(state=back["state"], cookie=back["cookie"], code="not-a-code")
        assert page.status_code == 400
        assert "refused" in page.content.decode()
        assert refusals == [(Operation.FINISH_CONNECT, 400)]
        assert "audit event not written: DatabaseError" in caplog.text
        assert not ConnectedService.objects.exists()

    def test_a_refused_exchange_stores_nothing(self, alice_api, stand_in, client_secret):
        url = connect(alice_api).json()["authorizeUrl"]
        back = consent(stand_in, url)
        page = callback(state=back["state"], cookie=back["cookie"], code="not-a-code")
        assert page.status_code == 400
        assert "refused" in page.content.decode()
        assert not ConnectedService.objects.exists()


# --- a connection's own API host --------------------------------------------------------------


@pytest.fixture
def salesforce_client(alice_api, stand_in):
    assert put_client(alice_api, "salesforce", marked("sf-secret")).status_code == 201


@pytest.mark.django_db
class TestTheConnectionsApiHost:
    def test_the_instance_url_of_the_token_answer_is_stored_with_the_set(
        self, alice_api, stand_in, salesforce_client
    ):
        stand_in.extra_answer = {"instance_url": "https://acme.my.salesforce.com"}
        url = connect(alice_api, "salesforce").json()["authorizeUrl"]
        assert callback(**consent(stand_in, url)).status_code == 200
        stored = opened_set(ConnectedService.objects.get(service="salesforce"))
        assert stored["instance_url"] == "https://acme.my.salesforce.com"
        assert stored["access_token"] in stand_in.access_tokens

    @pytest.mark.parametrize(
        "instance_url",
        [
            "https://evil.example",
            "https://acme.my.salesforce.com.evil.example",
            "http://acme.my.salesforce.com",
            "https://acme.my.salesforce.com:8443",
            "https://user@acme.my.salesforce.com",
        ],
    )
    def test_an_instance_url_outside_the_pattern_stores_nothing_and_says_why(
        self, alice_api, stand_in, salesforce_client, instance_url
    ):
        stand_in.extra_answer = {"instance_url": instance_url}
        url = connect(alice_api, "salesforce").json()["authorizeUrl"]
        page = callback(**consent(stand_in, url))
        assert page.status_code == 400
        text = page.content.decode()
        assert "instance_url" in text
        assert "*.my.salesforce.com" in text
        assert "Nothing was stored" in text
        assert instance_url not in text
        assert not ConnectedService.objects.exists()
        event = AuditEvent.objects.filter(action="oauth.callback").get()
        assert (event.status, event.target) == (400, "api_host_refused")

    def test_a_refresh_takes_a_new_instance_url_and_keeps_the_old_for_a_bad_one(
        self, alice_api, stand_in, salesforce_client
    ):
        stand_in.extra_answer = {"instance_url": "https://acme.my.salesforce.com"}
        stand_in.expires_in = 30  # within the refresh window from the start
        url = connect(alice_api, "salesforce").json()["authorizeUrl"]
        assert callback(**consent(stand_in, url)).status_code == 200
        grant = [{"service": "salesforce", "access": "read"}]
        assert put_agent(alice_api, "bot", grant).status_code == 201
        token = agent_token(alice_api, "bot")
        stand_in.extra_answer = {"instance_url": "https://acme2.my.salesforce.com"}
        assert values_of(agent_read(token, "salesforce"))["instance_url"] == (
            "https://acme2.my.salesforce.com"
        )
        stand_in.extra_answer = {"instance_url": "https://evil.example"}
        values = values_of(agent_read(token, "salesforce"))
        assert values["instance_url"] == "https://acme2.my.salesforce.com"
        assert values["access_token"] in stand_in.access_tokens  # the new tokens are kept
        assert stand_in.refreshes == 2


# --- refresh ---------------------------------------------------------------------------------


def store_expiring(api, stand_in, *, seconds: int = 30, service: str = "github") -> tuple:
    access, refresh = stand_in.issue()
    expires = (timezone.now() + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    response = api.store(
        service, creds(access_token=access, refresh_token=refresh, expires_at=expires)
    )
    assert response.status_code in (200, 201), response.content
    return access, refresh


def agent_read(token: str, service: str = "github"):
    return Client(raise_request_exception=False).get(
        f"/api/v1/agent/credentials/{service}", headers={"Authorization": f"Bearer {token}"}
    )


@pytest.fixture
def reader(alice_api, stand_in, client_secret):
    assert put_agent(alice_api, "bot", [{"service": "github", "access": "read"}]).status_code == 201
    return agent_token(alice_api, "bot")


def values_of(response) -> dict[str, str]:
    return {entry["keyName"]: entry["value"] for entry in response.json()["credentials"]}


@pytest.mark.django_db
class TestRefreshOnUse:
    def test_the_agent_read_refreshes_ahead_of_expiry(self, alice_api, stand_in, reader):
        old_access, refresh = store_expiring(alice_api, stand_in, seconds=60)
        response = agent_read(reader)
        assert response.status_code == 200
        values = values_of(response)
        assert values["access_token"] != old_access
        assert values["access_token"] in stand_in.access_tokens
        assert values["refresh_token"] == refresh  # not rotating: kept
        assert stand_in.refreshes == 1
        [request] = stand_in.token_requests
        assert request.form["grant_type"] == "refresh_token"
        assert ("oauth.refresh", "success") in set(
            AuditEvent.objects.values_list("action", "outcome")
        )

    def test_a_set_far_from_expiry_is_not_refreshed(self, alice_api, stand_in, reader):
        access, _ = store_expiring(alice_api, stand_in, seconds=3600)
        assert values_of(agent_read(reader))["access_token"] == access
        assert stand_in.token_requests == []

    def test_the_proxy_refreshes_ahead_of_expiry(self, alice_api, stand_in, client_secret):
        store_expiring(alice_api, stand_in, seconds=10)
        put_agent(alice_api, "px", ["github"])
        token = agent_token(alice_api, "px")
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 200
        assert stand_in.refreshes == 1
        assert stand_in.api_requests[-1]["token"] in stand_in.access_tokens

    def test_a_401_is_refreshed_once_and_retried_once(self, alice_api, stand_in, client_secret):
        store_expiring(alice_api, stand_in, seconds=3600)
        put_agent(alice_api, "px", ["github"])
        token = agent_token(alice_api, "px")
        stand_in.revoke_access()  # the provider no longer takes the stored token
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 200
        assert stand_in.refreshes == 1
        assert len(stand_in.api_requests) == 2
        assert AuditEvent.objects.filter(action="agent.proxy").count() == 1

    def test_a_401_on_post_is_not_retried(self, alice_api, stand_in, client_secret):
        store_expiring(alice_api, stand_in, seconds=3600)
        put_agent(alice_api, "px", ["github"])
        token = agent_token(alice_api, "px")
        stand_in.revoke_access()
        response = call(token, "POST", "github", "/user", body=b"{}")
        assert response.status_code in (401, 404)
        assert stand_in.refreshes == 0

    def test_a_refresh_answer_without_refresh_token_keeps_the_old_one(
        self, alice_api, stand_in, reader
    ):
        stand_in.send_refresh_token = False
        _, refresh = store_expiring(alice_api, stand_in)
        assert values_of(agent_read(reader))["refresh_token"] == refresh

    def test_a_rotating_provider_never_loses_the_connection(self, alice_api, stand_in, reader):
        """Each refresh spends the refresh token and gets a new one; each answer expires
        within the refresh window, so every use refreshes again, with the latest token."""
        stand_in.rotating = True
        stand_in.expires_in = 30
        store_expiring(alice_api, stand_in)
        for _ in range(3):
            assert agent_read(reader).status_code == 200
            stored = opened_set(ConnectedService.objects.get())
            assert stored["refresh_token"] in stand_in.refresh_tokens
        assert stand_in.refreshes == 3
        assert len(stand_in.refresh_tokens) == 1

    def test_a_fault_before_the_commit_keeps_the_old_set(
        self, alice_api, stand_in, reader, monkeypatch
    ):
        store_expiring(alice_api, stand_in)
        before = opened_set(ConnectedService.objects.get())

        def broken(*args, **kwargs):
            raise RuntimeError("injected fault after the provider answered")

        monkeypatch.setattr(oauth_refresh.queries, "replace_fields", broken)
        assert agent_read(reader).status_code == 500
        assert stand_in.refreshes == 1
        assert opened_set(ConnectedService.objects.get()) == before
        monkeypatch.undo()
        response = agent_read(reader)
        assert response.status_code == 200
        assert stand_in.refreshes == 2

    def test_invalid_grant_requires_reauthorization(self, alice_api, stand_in, reader):
        stand_in.refresh_mode = "invalid_grant"
        access, _ = store_expiring(alice_api, stand_in)
        assert_problem(agent_read(reader), 409, "reauthorization_required")
        assert alice_api.list().json()[0]["status"] == "reauthorization_required"
        assert opened_set(ConnectedService.objects.get())["access_token"] == access
        event = AuditEvent.objects.filter(action="oauth.refresh").get()
        assert (event.outcome, event.status, event.target) == ("refused", 409, "invalid_grant")
        # And it stays so, with nothing more sent, until the person connects again.
        assert_problem(agent_read(reader), 409, "reauthorization_required")
        assert len(stand_in.token_requests) == 1
        connected_github(alice_api, stand_in)
        assert alice_api.list().json()[0]["status"] == "connected"

    def test_a_misconfigured_client_is_named_in_the_event(self, alice_api, stand_in, reader):
        stand_in.refresh_mode = "invalid_client"
        store_expiring(alice_api, stand_in)
        assert_problem(agent_read(reader), 409, "oauth_client_misconfigured")
        assert AuditEvent.objects.get(action="oauth.refresh").target == "invalid_client"

    @pytest.mark.parametrize(
        ("status", "error"),
        [
            (401, "invalid_client"),
            (400, "unauthorized_client"),
            (400, "invalid_client_id"),  # Salesforce
            (200, "invalid_client_id"),  # Slack, with ok: false
            (200, "bad_client_secret"),  # Slack
            (200, "incorrect_client_credentials"),  # GitHub
        ],
    )
    def test_a_refused_client_is_misconfiguration_and_changes_nothing(
        self, alice_api, stand_in, reader, status, error
    ):
        """The operator's client, not the person's consent: the connection stays
        `connected` with its set, the answer says the client is misconfigured, and once the
        client is corrected the next use refreshes."""
        stand_in.refresh_error = (status, error)
        access, refresh = store_expiring(alice_api, stand_in)
        before = ConnectedService.objects.values().get()
        response = agent_read(reader)
        assert_problem(response, 409, "oauth_client_misconfigured")
        assert "misconfigured" in response.json()["detail"]
        assert ConnectedService.objects.values().get() == before
        assert alice_api.list().json()[0]["status"] == "connected"
        assert opened_set(ConnectedService.objects.get())["refresh_token"] == refresh
        event = AuditEvent.objects.get(action="oauth.refresh")
        assert (event.status, event.target) == (409, error)
        assert access not in response.content.decode()
        stand_in.refresh_error = None  # the client is corrected
        response = agent_read(reader)
        assert response.status_code == 200
        assert values_of(response)["access_token"] in stand_in.access_tokens
        assert stand_in.refreshes == 1

    def test_a_proxy_call_says_the_client_is_misconfigured(self, alice_api, stand_in, reader):
        stand_in.refresh_error = (200, "incorrect_client_credentials")
        store_expiring(alice_api, stand_in, seconds=10)
        put_agent(alice_api, "px", ["github"])
        response = call(agent_token(alice_api, "px"), "GET", "github", "/user")
        assert_problem(response, 409, "oauth_client_misconfigured")
        assert stand_in.api_requests == []
        assert alice_api.list().json()[0]["status"] == "connected"

    def test_figma_refreshes_at_its_refresh_url_and_keeps_its_refresh_token(
        self, alice_api, stand_in
    ):
        stand_in.send_refresh_token = False  # Figma's refresh answer holds none
        assert put_client(alice_api, "figma", marked("figma-secret")).status_code == 201
        grant = [{"service": "figma", "access": "read"}]
        assert put_agent(alice_api, "bot", grant).status_code == 201
        _, refresh = store_expiring(alice_api, stand_in, service="figma")
        response = agent_read(agent_token(alice_api, "bot"), "figma")
        assert response.status_code == 200
        [request] = stand_in.token_requests
        assert request.path == "/refresh"
        assert request.form["refresh_token"] == refresh
        assert values_of(response)["refresh_token"] == refresh

    def test_an_unavailable_token_url_is_503_and_changes_nothing(self, alice_api, stand_in, reader):
        stand_in.refresh_mode = "unavailable"
        store_expiring(alice_api, stand_in)
        before = ConnectedService.objects.values().get()
        assert_problem(agent_read(reader), 503, "provider_unavailable")
        after = ConnectedService.objects.values().get()
        # Only the pause of the service's refreshes
        # (tests/services/oauth/test_oauth_rotation_safety.py).
        assert after.pop("refresh_paused_until") > timezone.now()
        before.pop("refresh_paused_until")
        assert before == after
        assert alice_api.list().json()[0]["status"] == "connected"

    def test_a_set_connected_as_another_service_is_refreshed_at_its_provider(
        self, alice_api, stand_in, client_secret
    ):
        stand_in.expires_in = 30  # within the refresh window from the start
        url = connect(alice_api, body={"service": "GitHub Work"}).json()["authorizeUrl"]
        assert callback(**consent(stand_in, url)).status_code == 200
        assert [s["service"] for s in alice_api.list().json()] == ["github-work"]
        grant = [{"service": "github-work", "access": "read"}]
        assert put_agent(alice_api, "bot", grant).status_code == 201
        response = agent_read(agent_token(alice_api, "bot"), "github-work")
        assert response.status_code == 200
        assert stand_in.refreshes == 1
        assert values_of(response)["access_token"] in stand_in.access_tokens

    def test_testing_an_oauth_set_never_refreshes_it(self, alice_api, stand_in, client_secret):
        access, refresh = stand_in.issue()
        expires = (timezone.now() + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        response = alice_api.test(
            "github", creds(access_token=access, refresh_token=refresh, expires_at=expires)
        )
        assert response.status_code == 200
        assert stand_in.token_requests == []


@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_uses_cause_exactly_one_refresh(alice_api, stand_in, client_secret):
    stand_in.rotating = True
    stand_in.refresh_delay = 0.3  # every waiter arrives while the one refresh runs
    assert put_agent(alice_api, "bot", [{"service": "github", "access": "read"}]).status_code == 201
    token = agent_token(alice_api, "bot")
    store_expiring(alice_api, stand_in)
    barrier = threading.Barrier(16)
    results: list[tuple[int, str]] = [(0, "")] * 16

    def use(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            response = agent_read(token)
            value = values_of(response)["access_token"] if response.status_code == 200 else ""
            results[index] = (response.status_code, value)
        finally:
            connection.close()

    threads = [threading.Thread(target=use, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert stand_in.refreshes == 1
    assert Counter(status for status, _ in results) == {200: 16}, results
    assert len({value for _, value in results}) == 1
    assert results[0][1] in stand_in.access_tokens
    assert opened_set(ConnectedService.objects.get())["refresh_token"] in stand_in.refresh_tokens


# --- the command -----------------------------------------------------------------------------


@pytest.mark.django_db
class TestRefreshTokensCommand:
    def test_refreshes_what_expires_within_the_window(self, alice_api, stand_in, client_secret):
        store_expiring(alice_api, stand_in, seconds=20 * 60)
        out = StringIO()
        call_command("refresh_tokens", "--ahead", "10", stdout=out)
        assert stand_in.refreshes == 0
        call_command("refresh_tokens", "--ahead", "30", stdout=out)
        assert stand_in.refreshes == 1
        assert "1 refreshed, 0 failed" in out.getvalue()

    def test_a_misconfigured_client_is_its_own_line(self, alice_api, stand_in, client_secret):
        stand_in.refresh_error = (401, "invalid_client")
        store_expiring(alice_api, stand_in)
        err = StringIO()
        with pytest.raises(CommandError):
            call_command("refresh_tokens", stdout=StringIO(), stderr=err)
        assert "alice/github: oauth_client_misconfigured" in err.getvalue()
        assert alice_api.list().json()[0]["status"] == "connected"

    def test_a_failure_is_one_line_and_a_non_zero_exit(
        self, alice_api, stand_in, client_secret, caplog
    ):
        stand_in.refresh_mode = "invalid_grant"
        access, refresh = store_expiring(alice_api, stand_in)
        out, err = StringIO(), StringIO()
        with caplog.at_level(logging.DEBUG), pytest.raises(CommandError):
            call_command("refresh_tokens", stdout=out, stderr=err)
        assert "alice/github: reauthorization_required" in err.getvalue()
        everything = out.getvalue() + err.getvalue() + caplog.text
        assert access not in everything
        assert refresh not in everything


@pytest.mark.django_db
class TestRefreshBy:
    """The service row's `refresh_by` (the set's expiry where it holds a refresh token), kept
    in step with every store, finds the due sets in one query without opening any."""

    def test_the_due_sets_are_one_query_and_no_other_set_is_opened(
        self, alice_api, stand_in, client_secret, django_assert_num_queries, monkeypatch
    ):
        store_expiring(alice_api, stand_in, seconds=30, service="github")
        store_expiring(alice_api, stand_in, seconds=3600, service="gitlab")
        assert alice_api.store("openai", creds(api_key=marked("k"))).status_code == 201
        with django_assert_num_queries(1):
            due = due_sets(ahead_seconds=600)
        assert [(d.service, d.generation) for d in due] == [("github", 1)]
        opened: list[str] = []
        real_open = envelope.open

        def spied(key_id, blob, place, **kwargs):
            opened.append(place.service)
            return real_open(key_id, blob, place, **kwargs)

        monkeypatch.setattr(envelope, "open", spied)
        call_command("refresh_tokens", "--ahead", "10", stdout=StringIO())
        assert stand_in.refreshes == 1
        assert "github" in opened
        assert "gitlab" not in opened
        assert "openai" not in opened

    def test_it_follows_every_store_and_refresh(self, alice_api, stand_in, client_secret):
        def refresh_by(service: str = "github"):
            return ConnectedService.objects.get(service=service).refresh_by

        store_expiring(alice_api, stand_in, seconds=30)
        expires = opened_set(ConnectedService.objects.get())["expires_at"]
        assert refresh_by().strftime("%Y-%m-%dT%H:%M:%SZ") == expires
        call_command("refresh_tokens", stdout=StringIO())
        refreshed = opened_set(ConnectedService.objects.get())["expires_at"]
        assert refreshed != expires
        assert refresh_by().strftime("%Y-%m-%dT%H:%M:%SZ") == refreshed
        access, _ = stand_in.issue(refresh=False)
        response = alice_api.store("github", creds(access_token=access, expires_at=expires))
        assert response.status_code == 200
        assert refresh_by() is None  # no refresh token: never refreshed ahead
        connected_github(alice_api, stand_in)
        assert refresh_by() > timezone.now() + timedelta(minutes=50)
        assert alice_api.store("openai", creds(api_key=marked("k"))).status_code == 201
        assert refresh_by("openai") is None

    def test_the_migration_fills_it_for_the_sets_stored_before(
        self, alice_api, stand_in, client_secret
    ):
        store_expiring(alice_api, stand_in, seconds=30)
        before = ConnectedService.objects.get().refresh_by
        ConnectedService.objects.update(refresh_by=None)
        migration = importlib.import_module("services.migrations.0019_connectedservice_refresh_by")
        migration.fill_refresh_by(apps, None)
        assert ConnectedService.objects.get().refresh_by == before
        assert [d.service for d in due_sets(ahead_seconds=600)] == ["github"]


@pytest.mark.django_db
def test_no_token_value_in_any_event_or_log_line(alice_api, stand_in, client_secret, caplog):
    with caplog.at_level(logging.DEBUG):
        connected_github(alice_api, stand_in)
        assert put_agent(alice_api, "bot", [{"service": "github", "access": "read"}]).status_code
        token = agent_token(alice_api, "bot")
        ConnectedService.objects.update()
        store_expiring(alice_api, stand_in)
        agent_read(token)
    secrets_seen = stand_in.access_tokens | stand_in.refresh_tokens | {client_secret}
    events = json.dumps(list(AuditEvent.objects.values()), default=str)
    for value in secrets_seen:
        assert value not in events
        assert value not in caplog.text
