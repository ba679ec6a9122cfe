"""The test operation against a real provider on 127.0.0.1: what arrives at the
provider, how its answer is judged, and what the client refuses to do."""

from __future__ import annotations

import base64
import json
import logging
import time

import pytest

from providers.catalog import catalog
from tests.support.helpers import assert_problem, creds, elapsed, marked
from tests.support.stand_ins import ProviderServer

pytestmark = pytest.mark.django_db

ACCEPTED = {"ok": True, "verified": True, "reason": "accepted"}
REJECTED = {"ok": False, "verified": False, "reason": "rejected"}
UNAVAILABLE = {"ok": False, "verified": False, "reason": "provider_unavailable"}


def verdict_of(api, service="github", **values):
    response = api.test(service, creds(**values or {"api_key": "ghp_valid"}))
    assert response.status_code == 200, response.content
    return response.json()


class TestWhatArrives:
    def test_github_gets_a_bearer_get_with_its_version_header(self, alice_api, provider_server):
        key = marked()
        assert verdict_of(alice_api, "github", api_key=key) == ACCEPTED
        [request] = provider_server.requests
        assert (request.method, request.path) == ("GET", "/user")
        assert request.headers["Authorization"] == f"Bearer {key}"
        assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert key not in request.path

    def test_gitlab_token_goes_in_private_token(self, alice_api, provider_server):
        key = marked()
        verdict_of(alice_api, "gitlab", api_key=key)
        [request] = provider_server.requests
        assert (request.method, request.path) == ("GET", "/api/v4/user")
        assert request.headers["PRIVATE-TOKEN"] == key
        assert "Authorization" not in request.headers

    def test_anthropic_gets_x_api_key_and_version(self, alice_api, provider_server):
        key = marked()
        verdict_of(alice_api, "anthropic", api_key=key)
        [request] = provider_server.requests
        assert request.headers["x-api-key"] == key
        assert request.headers["anthropic-version"] == "2023-06-01"

    def test_twilio_checks_the_account_its_set_names(self, alice_api, provider_server):
        sid, key_sid, secret = "AC0123456789abcdef0123456789abcdef", "SK" + "0" * 32, marked()
        verdict_of(alice_api, "twilio", account_sid=sid, api_key_sid=key_sid, api_key_secret=secret)
        verdict_of(alice_api, "twilio", account_sid=sid, auth_token=secret)
        by_key, by_token = provider_server.requests
        assert by_key.path == f"/2010-04-01/Accounts/{sid}/IncomingPhoneNumbers.json"
        assert by_token.path == f"/2010-04-01/Accounts/{sid}.json"
        pair = base64.b64encode(f"{key_sid}:{secret}".encode()).decode()
        assert by_key.headers["Authorization"] == f"Basic {pair}"

    def test_a_path_identifier_is_one_encoded_segment(self, alice_api, provider_server):
        verdict_of(alice_api, "twilio", account_sid="AC1/../x?y", auth_token=marked())
        [request] = provider_server.requests
        assert request.path == "/2010-04-01/Accounts/AC1%2F..%2Fx%3Fy.json"

    def test_bitbucket_sends_the_account_email_and_api_token(self, alice_api, provider_server):
        token = marked()
        verdict_of(alice_api, "bitbucket", email="dev@example.com", api_token=token)
        [request] = provider_server.requests
        pair = base64.b64encode(f"dev@example.com:{token}".encode()).decode()
        assert (request.path, request.headers["Authorization"]) == ("/2.0/user", f"Basic {pair}")

    def test_oauth_shape_sends_the_access_token(self, alice_api, provider_server):
        token = marked()
        verdict_of(alice_api, "github", access_token=token, refresh_token=marked())
        assert provider_server.requests[0].headers["Authorization"] == f"Bearer {token}"

    def test_nothing_is_stored(self, alice_api, provider_server):
        from services.models import ConnectedService, CredentialField

        verdict_of(alice_api, "github", api_key="k")
        assert not ConnectedService.objects.exists()
        assert not CredentialField.objects.exists()


class TestJudgement:
    @pytest.mark.parametrize("status", [200, 204])
    def test_2xx_is_accepted(self, alice_api, provider_server, status):
        provider_server.answer(status, b"")
        assert verdict_of(alice_api) == ACCEPTED

    @pytest.mark.parametrize("status", [401, 403])
    def test_401_and_403_are_rejected(self, alice_api, provider_server, status):
        provider_server.answer(status, {"message": "Bad credentials"})
        assert verdict_of(alice_api) == REJECTED

    @pytest.mark.parametrize("status", [429, 500, 502, 503, 400, 404])
    def test_429_5xx_and_other_answers_are_unavailable(self, alice_api, provider_server, status):
        provider_server.answer(status, {"error": "x"})
        assert verdict_of(alice_api) == UNAVAILABLE

    def test_slack_counts_only_ok_true(self, alice_api, provider_server):
        provider_server.answer(200, {"ok": True, "user": "bot"})
        assert verdict_of(alice_api, "slack", api_key="xoxb-1") == ACCEPTED
        assert provider_server.requests[-1].method == "POST"
        assert provider_server.requests[-1].path == "/api/auth.test"

    def test_slack_ok_false_is_rejected(self, alice_api, provider_server):
        provider_server.answer(200, {"ok": False, "error": "invalid_auth"})
        assert verdict_of(alice_api, "slack", api_key="xoxb-1") == REJECTED

    @pytest.mark.parametrize(
        "body", [b"not json", b"[true]", json.dumps({"ok": "true"}).encode(), b'{"ok": 1}']
    )
    def test_slack_without_a_json_ok_true_is_not_accepted(self, alice_api, provider_server, body):
        provider_server.answer(200, body)
        assert verdict_of(alice_api, "slack", api_key="xoxb-1")["verified"] is False

    def test_an_answer_over_64_kib_is_unavailable(self, alice_api, provider_server):
        provider_server.answer(200, json.dumps({"ok": True, "pad": "x" * 70_000}).encode())
        assert verdict_of(alice_api, "slack", api_key="xoxb-1") == UNAVAILABLE

    def test_the_providers_answer_is_never_passed_back(self, alice_api, provider_server):
        echo = marked("provider")
        provider_server.answer(403, {"message": echo})
        response = alice_api.test("github", creds(api_key="k"))
        assert echo not in response.content.decode()


class TestRefusals:
    def test_a_redirect_is_not_followed(self, alice_api, provider_server):
        target = ProviderServer().start()
        try:
            provider_server.answer(302, b"", headers={"Location": f"{target.url}/steal"})
            assert verdict_of(alice_api) == UNAVAILABLE
            assert len(provider_server.requests) == 1
            assert target.requests == []
        finally:
            target.stop()

    def test_a_server_that_never_answers_is_cut_off(self, alice_api, provider_server, settings):
        settings.CREDVAULT_VERIFY_TIMEOUT = 1.0
        provider_server.answer(hang=True)
        start = time.monotonic()
        assert verdict_of(alice_api) == UNAVAILABLE
        assert elapsed(start) < 2.5

    def test_a_dripping_answer_is_cut_off_at_the_bound(self, alice_api, provider_server, settings):
        """Per-read timeouts never trip on one byte every 0.2 s; the whole-call bound does."""
        settings.CREDVAULT_VERIFY_TIMEOUT = 1.0
        provider_server.answer(
            200, json.dumps({"ok": True, "p": "x" * 60}).encode(), drip_seconds=0.2
        )
        start = time.monotonic()
        assert verdict_of(alice_api, "slack", api_key="xoxb-1") == UNAVAILABLE
        assert elapsed(start) < 2.5

    def test_a_name_lookup_that_hangs_is_cut_off_and_sends_nothing_late(
        self, alice_api, provider_server, settings, monkeypatch
    ):
        """No socket timeout interrupts a name lookup; the call still returns at the bound,
        and the connection made after it carries no request. (A name, not an address: an
        address needs no lookup.)"""
        import socket

        real = socket.getaddrinfo
        settings.CREDVAULT_VERIFY_TIMEOUT = 1.0
        port = provider_server.url.rsplit(":", 1)[1]
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": f"http://localhost:{port}"})

        def slow_lookup(host, port, *args, **kwargs):
            time.sleep(2.0)
            return real("127.0.0.1", port, *args, **kwargs)  # where the stand-in listens

        monkeypatch.setattr(socket, "getaddrinfo", slow_lookup)
        start = time.monotonic()
        assert verdict_of(alice_api) == UNAVAILABLE
        assert elapsed(start) < 2.0
        time.sleep(1.5)  # past the lookup: the late connection is made and shut at once
        assert provider_server.requests == []

    def test_a_refused_connection_is_unavailable(self, alice_api, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": "http://127.0.0.1:9"})
        assert verdict_of(alice_api) == UNAVAILABLE

    def test_proxy_settings_of_the_environment_are_ignored(
        self, alice_api, provider_server, monkeypatch
    ):
        proxy = ProviderServer().start()
        try:
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
                monkeypatch.setenv(name, proxy.url)
            monkeypatch.delenv("NO_PROXY", raising=False)
            monkeypatch.delenv("no_proxy", raising=False)
            assert verdict_of(alice_api) == ACCEPTED
            assert proxy.requests == []
            assert len(provider_server.requests) == 1
        finally:
            proxy.stop()

    @pytest.mark.parametrize(
        "extra",
        [
            {"baseUrl": "PROVIDER"},
            {"url": "PROVIDER/user"},
            {"verifyUrl": "PROVIDER"},
            {"callback": "PROVIDER"},
        ],
    )
    def test_url_like_members_are_refused_with_no_request(self, alice_api, provider_server, extra):
        body = {"service": "github", "credentials": creds(api_key="k")}
        body.update({k: v.replace("PROVIDER", provider_server.url) for k, v in extra.items()})
        response = alice_api.raw("POST", "/api/v1/services/test", json.dumps(body))
        assert_problem(response, 400, "invalid_request")
        assert provider_server.requests == []

    def test_url_like_service_and_entry_members_make_no_request(self, alice_api, provider_server):
        for body in (
            {"service": provider_server.url, "credentials": creds(api_key="k")},
            {
                "service": "github",
                "credentials": [{"keyName": "api_key", "value": "k", "url": provider_server.url}],
            },
            {"service": "github", "credentials": creds(api_key="k", base_url=provider_server.url)},
        ):
            response = alice_api.raw("POST", "/api/v1/services/test", json.dumps(body))
            assert response.status_code == 400
        assert provider_server.requests == []

    def test_custom_services_contact_nothing(self, alice_api, provider_server):
        result = verdict_of(alice_api, "my-own-api", api_key="k", base_url=provider_server.url)
        assert result == {"ok": True, "verified": False, "reason": "no_verifier"}
        assert provider_server.requests == []

    @pytest.mark.parametrize("value", ["line\nbreak", "tab\tinside", "caf\u00e9"])
    def test_a_value_unsendable_in_a_header_is_rejected_unsent(
        self, alice_api, provider_server, value
    ):
        assert verdict_of(alice_api, "github", api_key=value) == REJECTED
        assert provider_server.requests == []


class TestLogging:
    def test_failures_log_no_url_value_or_exception_text(self, alice_api, settings, caplog):
        key = marked()
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": "http://127.0.0.1:9"})
        with caplog.at_level(logging.DEBUG):
            verdict_of(alice_api, "github", api_key=key)
        text = caplog.text
        assert key not in text
        assert "127.0.0.1:9" not in text
        assert "verification of github: provider_unavailable" in text


class TestCatalog:
    def test_the_first_catalog_holds_the_six_providers(self):
        assert {"github", "gitlab", "openai", "anthropic", "stripe", "slack"} <= set(catalog())
