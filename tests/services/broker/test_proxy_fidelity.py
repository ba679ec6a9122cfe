"""What an SDK relies on in a brokered answer besides its body: the provider's own addresses
moved onto the proxy (Location, Content-Location, Link), a HEAD answer's Content-Length, the
provider's X-Request-ID beside credvault's X-Credvault-Request-Id, no method list of credvault's
(Allow) over the provider's, X-Credvault-Error on every
answer credvault gives itself, and a 403 that says what the grant lacks."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from services.broker.locations import onto_proxy
from services.exceptions import TokenRefused
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)
from tests.support.stand_ins import ProviderServer

PROXY_URL = f"http://testserver{PROXY_PREFIX}/github"
TOKEN_REFUSED = TokenRefused.default_code


@pytest.fixture
def github(alice_api, provider_server):
    """Alice's github set and the token of her agent with the default (brokered) grant."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    return agent_token(alice_api, "bot")


@pytest.mark.django_db
class TestTheProvidersAddressesMoveOntoTheProxy:
    def test_a_link_header_for_the_next_page(self, github, provider_server: ProviderServer):
        base = provider_server.url
        link = f'<{base}/user/repos?page=2>; rel="next", <{base}/user/repos?page=5>; rel="last"'
        provider_server.answer(200, [], headers={"Link": link})
        response = call(github, "GET", "github", "/user/repos")
        assert response["Link"] == (
            f'<{PROXY_URL}/user/repos?page=2>; rel="next", '
            f'<{PROXY_URL}/user/repos?page=5>; rel="last"'
        )

    def test_location_and_content_location(self, github, provider_server: ProviderServer):
        provider_server.answer(
            201,
            {},
            headers={
                "Location": f"{provider_server.url}/repos/o/r/issues/7",
                "Content-Location": "/repos/o/r/issues/7?x=1#top",
            },
        )
        response = call(github, "POST", "github", "/repos/o/r/issues", body=b"{}")
        assert response["Location"] == f"{PROXY_URL}/repos/o/r/issues/7"
        assert response["Content-Location"] == f"{PROXY_URL}/repos/o/r/issues/7?x=1#top"

    def test_an_address_elsewhere_passes_unchanged(self, github, provider_server):
        # Not a redirect (a 302 to GET that leaves the service is followed by credvault:
        # tests/services/broker/test_foreign_redirects.py); a relative reference is moved like
        # any other (tests/services/broker/test_answer_addresses.py).
        elsewhere = "https://uploads.example.com/repos/o/r"
        provider_server.answer(201, {}, headers={"Location": elsewhere, "Link": f"<{elsewhere}>"})
        response = call(github, "POST", "github", "/repos/o/r", body=b"{}")
        assert (response["Location"], response["Link"]) == (elsewhere, f"<{elsewhere}>")


class TestOntoProxy:
    """The rule itself, for API bases with a path."""

    BASE = "https://api.openai.com/v1"
    PROXY = "https://cv.example/api/v1/agent/proxy/openai"

    @pytest.mark.parametrize(
        ("value", "moved"),
        [
            ("https://api.openai.com/v1/files?after=f", f"{PROXY}/files?after=f"),
            ("HTTPS://API.OpenAI.com:443/v1", PROXY),
            ("//api.openai.com/v1/models", f"{PROXY}/models"),
            ("/v1/models#x", f"{PROXY}/models#x"),
            # Outside the base: absolute at the provider, never resolved against credvault.
            ("/v10/models", "https://api.openai.com/v10/models"),
            ("/v2/models", "https://api.openai.com/v2/models"),
            ("http://api.openai.com/v1/models", "http://api.openai.com/v1/models"),
            ("https://api.openai.com:8443/v1/models", "https://api.openai.com:8443/v1/models"),
            ("https://api.openai.com:x/v1", "https://api.openai.com:x/v1"),
            ("https://evil.example/v1/models", "https://evil.example/v1/models"),
        ],
    )
    def test_location(self, value, moved):
        [(_, got)] = onto_proxy(
            [("Location", value)], api_base=self.BASE, proxy_url=lambda: self.PROXY
        )
        assert got == moved

    def test_other_headers_are_left_alone(self):
        headers = [("X-Next", f"{self.BASE}/files"), ("Link", f"<{self.BASE}/a>; rel=next")]
        assert onto_proxy(headers, api_base=self.BASE, proxy_url=lambda: self.PROXY) == [
            ("X-Next", f"{self.BASE}/files"),
            ("Link", f"<{self.PROXY}/a>; rel=next"),
        ]


@pytest.mark.django_db
class TestFidelity:
    def test_a_head_answer_keeps_the_providers_content_length(self, github, provider_server):
        provider_server.answer(200, b"x" * 1234, headers={"Content-Type": "text/plain"})
        response = call(github, "HEAD", "github", "/repos/o/r/tarball")
        assert response.status_code == 200
        assert response["Content-Length"] == "1234"
        assert response.content == b""

    def test_the_providers_request_id_reaches_the_agent(self, github, provider_server):
        provider_server.answer(200, {}, headers={"X-Request-ID": "req_abc123"})
        response = call(github, "GET", "github", "/user")
        assert response["X-Request-ID"] == "req_abc123"
        assert len(response["X-Credvault-Request-Id"]) == 32
        assert "X-Credvault-Error" not in response

    def test_no_request_id_of_credvaults_poses_as_the_providers(self, github, provider_server):
        provider_server.answer(200, {})
        response = call(github, "GET", "github", "/user")
        assert "X-Request-ID" not in response
        assert response["X-Credvault-Request-Id"]

    def test_the_providers_allow_header_is_its_own(self, github, provider_server):
        provider_server.answer(405, {"message": "Method Not Allowed"}, headers={"Allow": "GET"})
        assert call(github, "PUT", "github", "/user", body=b"{}")["Allow"] == "GET"
        provider_server.answer(200, {})
        assert "Allow" not in call(github, "GET", "github", "/user")

    def test_a_providers_error_carries_no_credvault_error(self, github, provider_server):
        provider_server.answer(404, {"message": "Not Found"})
        response = call(github, "GET", "github", "/repos/o/missing")
        assert response.status_code == 404
        assert "X-Credvault-Error" not in response


@pytest.mark.django_db
class TestCredvaultsOwnAnswersOnTheProxy:
    def test_each_carries_its_code(self, alice_api, github, provider_server, settings):
        settings.CREDVAULT_PROXY_TIMEOUT = 0.3
        provider_server.answer(200, {}, delay_seconds=2)
        cases = [
            (call("cva_not-a-token", "GET", "github", "/user"), 401, TOKEN_REFUSED),
            (call(github, "GET", "slack", "/x"), 403, "not_granted"),
            (call(github, "GET", "github", "/a/%2e%2e/b"), 400, "invalid_proxy_path"),
            (call(github, "GET", "github", "/user"), 504, "upstream_timeout"),
        ]
        for response, status, code in cases:
            assert_problem(response, status, code)
            assert response["X-Credvault-Error"] == code
            assert response["X-Credvault-Request-Id"] == response["X-Request-ID"]

    def test_an_unknown_method_and_a_missing_token(self, db):
        response = Client().options(f"{PROXY_PREFIX}/github/user")
        assert response["X-Credvault-Error"] == json.loads(response.content)["code"]
        response = Client().get(f"{PROXY_PREFIX}/github/user")
        assert response.status_code == 401
        assert response["X-Credvault-Error"] == json.loads(response.content)["code"]

    def test_the_account_api_carries_none(self, alice_api):
        response = alice_api.raw("GET", "/api/v1/services/nothing")
        assert response.status_code == 404
        assert "X-Credvault-Error" not in response


@pytest.mark.django_db
class TestTheRefusalSaysWhatTheGrantLacks:
    @pytest.fixture
    def narrow(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant = {"service": "github", "methods": ["GET"], "paths": ["/repos/acme"]}
        assert put_agent(alice_api, "narrow", [grant], access=None).status_code == 201
        return agent_token(alice_api, "narrow")

    def test_no_grant(self, narrow):
        body = assert_problem(call(narrow, "GET", "slack", "/x"), 403, "not_granted")
        assert "no grant" in body["detail"]

    def test_a_method_outside_the_grant(self, narrow):
        response = call(narrow, "DELETE", "github", "/repos/acme/x")
        assert "method" in assert_problem(response, 403, "not_granted")["detail"]

    def test_a_path_outside_the_grant(self, narrow):
        response = call(narrow, "GET", "github", "/repos/other")
        assert "path" in assert_problem(response, 403, "not_granted")["detail"]
