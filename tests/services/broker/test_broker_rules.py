"""The brokered call's request-side rules that a penetration test broke: path parameters that
climb (`..;`), method overrides past a GET-only grant, endpoints that mint a credential, a proxy
prefix sent percent-encoded, addresses that carry another address, and the calls a token may
have in flight. Each against a real provider stand-in on 127.0.0.1, asserting what reached it."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.test import Client

from providers import catalog
from providers.http import resolving
from providers.http.addresses import is_public
from providers.http.destinations import named_destination, parse_allowed_hosts
from providers.http.failures import Failure, OutboundError
from providers.http.resolving import address_for
from services.broker import destination
from tests.conftest import REDIS_URL, require_local_service
from tests.support.harness import Gunicorn, migrated_account, request, server_env
from tests.support.helpers import assert_problem, creds, marked
from tests.support.stand_ins import ProviderServer

PREFIX = "/api/v1/agent/proxy"


def grant(api, name: str, services: list) -> None:
    response = api.raw("PUT", f"/api/v1/agents/{name}", json.dumps({"services": services}))
    assert response.status_code in (200, 201), response.content


def agent_token(api, name: str) -> str:
    response = api.raw("POST", f"/api/v1/agents/{name}/tokens", b"")
    assert response.status_code == 201, response.content
    return response.json()["token"]


def call(token: str, method: str, path: str, *, query: str = "", raw: str = "", **headers):
    extra = {"RAW_URI": raw} if raw else {}
    return Client(raise_request_exception=False).generic(
        method,
        f"{PREFIX}/github{path}" + (f"?{query}" if query else ""),
        b"",
        headers={"Authorization": f"Bearer {token}", **headers},
        **extra,
    )


@pytest.fixture
def github(alice_api, provider_server):
    """Alice's GitHub key and her agent `bot`, granted GET only; its token."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    grant(alice_api, "bot", [{"service": "github", "methods": ["GET"]}])
    return agent_token(alice_api, "bot")


@pytest.mark.django_db
class TestPathParameters:
    @pytest.mark.parametrize(
        "path", ["/repos/..;/admin", "/a/..;x/b", "/a/.;/b", "/a/;x/b", "/a/%2e%2e;/b"]
    )
    def test_a_segment_that_climbs_before_its_parameters_is_refused(
        self, github, provider_server, path
    ):
        assert_problem(call(github, "GET", path), 400, "invalid_proxy_path")
        assert provider_server.requests == []

    def test_a_parameter_after_a_real_segment_goes_on(self, github, provider_server):
        assert call(github, "GET", "/repos;v=1/o").status_code == 200
        assert provider_server.requests[0].path == "/repos;v=1/o"


@pytest.mark.django_db
class TestMethodOverrides:
    @pytest.mark.parametrize(
        "header", ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"]
    )
    def test_an_override_header_past_the_grant_is_refused(self, github, provider_server, header):
        response = call(github, "GET", "/repos/o/r", **{header: "DELETE"})
        assert_problem(response, 403, "not_granted")
        assert provider_server.requests == []

    @pytest.mark.parametrize("query", ["_method=DELETE", "a=1&_method=delete", "%5Fmethod=PUT"])
    def test_a_method_parameter_past_the_grant_is_refused(self, github, provider_server, query):
        assert_problem(call(github, "GET", "/repos/o/r", query=query), 403, "not_granted")
        assert provider_server.requests == []

    def test_an_allowed_override_goes_on_without_its_header(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant(alice_api, "bot", [{"service": "github", "methods": ["GET", "DELETE"]}])
        token = agent_token(alice_api, "bot")
        response = call(
            token, "GET", "/repos/o/r", query="_method=DELETE", **{"X-HTTP-Method": "DELETE"}
        )
        assert response.status_code == 200
        [sent] = provider_server.requests
        assert sent.path == "/repos/o/r?_method=DELETE"
        assert not {name.lower() for name in sent.headers} & {
            "x-http-method",
            "x-http-method-override",
            "x-method-override",
        }


@pytest.mark.django_db
class TestSensitiveEndpoints:
    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("POST", "/user/keys"),
            ("POST", "/repos/acme/app/keys"),
            ("POST", "/REPOS/acme/app/Keys"),
            ("POST", "/repos/acme/app/keys;x"),
            ("GET", "/authorizations"),
            ("POST", "/orgs/acme/hooks"),
        ],
    )
    def test_a_default_grant_never_reaches_one(self, alice_api, provider_server, method, path):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant(alice_api, "bot", ["github"])
        token = agent_token(alice_api, "bot")
        response = call(token, method, path)
        problem = assert_problem(response, 403, "sensitive_endpoint")
        assert "must name its path explicitly" in problem["detail"]
        assert provider_server.requests == []

    def test_an_override_cannot_reach_one_either(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant(alice_api, "bot", ["github"])
        token = agent_token(alice_api, "bot")
        response = call(token, "GET", "/user/keys", **{"X-HTTP-Method-Override": "POST"})
        assert_problem(response, 403, "sensitive_endpoint")
        assert provider_server.requests == []

    def test_a_grant_that_names_the_path_reaches_it(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant(alice_api, "bot", [{"service": "github", "paths": ["/user/keys", "/user"]}])
        token = agent_token(alice_api, "bot")
        assert call(token, "POST", "/user/keys").status_code == 200
        assert call(token, "GET", "/user/keys").status_code == 200  # reading is not minting
        assert [sent.path for sent in provider_server.requests] == ["/user/keys", "/user/keys"]

    def test_a_broader_prefix_does_not_name_it(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant(alice_api, "bot", [{"service": "github", "paths": ["/user"]}])
        token = agent_token(alice_api, "bot")
        assert_problem(call(token, "POST", "/user/keys"), 403, "sensitive_endpoint")
        assert call(token, "GET", "/user").status_code == 200


@pytest.mark.django_db
def test_an_encoded_proxy_prefix_is_404_and_nothing_is_sent(github, provider_server):
    response = call(github, "GET", "/x", raw="/api/v1/agent/%70roxy/github/x")
    assert_problem(response, 404, "not_found")
    assert provider_server.requests == []


class TestAddresses:
    @pytest.mark.parametrize(
        ("address", "public"),
        [
            ("140.82.112.5", True),
            ("2606:4700::1111", True),
            ("10.1.2.3", False),
            ("::ffff:140.82.112.5", False),  # IPv4-mapped
            ("::ffff:0:a00:1", False),  # IPv4-translated 10.0.0.1
            ("::ffff:0:8c52:7005", False),  # IPv4-translated, of a public address too
            ("::ffff:0:7f00:1", False),  # IPv4-translated loopback
            ("::140.82.112.5", False),  # IPv4-compatible
            ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
            ("64:ff9b::8c52:7005", False),  # NAT64 of a public address too
            ("64:ff9b:1::a00:1", False),  # local-use NAT64
            ("2002:a00:1::1", False),  # 6to4 of 10.0.0.1
            ("2002:8c52:7005::1", False),  # 6to4 of a public address
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
            ("fec0::1", False),  # site-local
            ("2606:4700::5efe:a00:1", False),  # ISATAP embedding 10.0.0.1
            ("2606:4700::5efe:8c52:7005", True),  # ISATAP embedding a public address
            ("fe80::1%eth0", False),
        ],
    )
    def test_what_counts_as_public(self, address, public):
        assert is_public(address) is public

    @pytest.mark.django_db
    def test_a_name_resolving_to_nat64_of_a_private_address_is_refused(
        self, alice_api, monkeypatch
    ):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        grant(alice_api, "bot", ["github"])
        token = agent_token(alice_api, "bot")
        monkeypatch.setattr(resolving, "resolver", lambda host, port: ["64:ff9b::a9fe:a9fe"])
        assert_problem(call(token, "GET", "/user"), 502, "upstream_unavailable")


class TestAllowedHosts:
    """CREDVAULT_OUTBOUND_ALLOWED_HOSTS: the hosts that a URL no configuration chose (a host a
    pattern matched, a followed redirect) may reach although not public or not https."""

    def test_entries_are_hosts_with_or_without_a_port(self):
        parsed = parse_allowed_hosts(" Stand-In.internal ,127.0.0.1:8443,[::1]:9000,")
        assert parsed == {("stand-in.internal", None), ("127.0.0.1", 8443), ("::1", 9000)}

    @pytest.mark.parametrize("entry", ["http://x", "x:port", "user@x", "x/y", ":80"])
    def test_anything_else_is_refused(self, entry):
        with pytest.raises(ValueError, match="is not a host or host:port"):
            parse_allowed_hosts(entry)

    def test_an_unnamed_url_must_be_https(self, settings):
        settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS = ""
        assert named_destination("http://files.example.com/x") is None
        assert named_destination("ftp://files.example.com/x") is None
        found = named_destination("https://files.example.com/x")
        assert (found.host, found.port, found.configured) == ("files.example.com", 443, False)

    def test_a_named_host_may_be_private_and_plain_http(self, settings):
        settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS = "127.0.0.1:8443,stand-in.internal"
        found = named_destination("http://127.0.0.1:8443/x")
        assert (found.scheme, found.host, found.configured) == ("http", "127.0.0.1", True)
        assert named_destination("http://stand-in.internal:81/").configured is True
        # Another port of a host named with one is not named.
        assert named_destination("http://127.0.0.1:8444/x") is None
        assert named_destination("https://127.0.0.1:8444/x").configured is False

    def test_an_unnamed_private_address_is_still_refused(self, settings):
        settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS = ""
        found = named_destination("https://127.0.0.1:8443/x")
        with pytest.raises(OutboundError) as refused:
            address_for(found, seconds=1)
        assert refused.value.kind is Failure.ADDRESS_REFUSED


class TestHasDestination:
    """Whether brokered calls to a provider can go anywhere before a set is read (the MCP
    server's `list_services` says `not_proxyable` where they cannot)."""

    @pytest.mark.parametrize(
        ("provider", "reachable"),
        [("github", True), ("salesforce", True), ("shopify", False), ("zendesk", False)],
    )
    def test_the_catalogs(self, provider, reachable, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = "{}"
        assert destination.has_destination(catalog.get(provider)) is reachable

    def test_an_operators_address(self, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"shopify": "https://shop.example"})
        assert destination.has_destination(catalog.get("shopify")) is True


@pytest.mark.slow
def test_calls_in_flight_are_capped_per_token_across_workers(tmp_path):
    """Two workers sharing Redis, a provider that holds its answers: the token's third call
    while two wait is 429 with Retry-After, and a call goes through once one has ended."""
    require_local_service("Redis", 6379)
    provider = ProviderServer().start()
    provider.answer(200, {"ok": True}, delay_seconds=3)
    env = server_env(
        f"sqlite:///{tmp_path / 'cap.sqlite3'}",
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider.url}),
        CREDVAULT_PROXY_MAX_CONCURRENT="2",
        CACHE_URL=f"{REDIS_URL}?key_prefix=cap-{time.monotonic_ns()}",
    )
    token = migrated_account(env, "acme")
    try:
        with Gunicorn(env, workers=2, log=tmp_path / "gunicorn.log") as server:
            body = {"service": "github", "credentials": [{"keyName": "api_key", "value": "k"}]}
            status, _, _ = request(
                "PUT", f"{server.url}/api/v1/services/credentials", token=token, body=body
            )
            assert status == 201
            request(
                "PUT", f"{server.url}/api/v1/agents/bot", token=token, body={"services": ["github"]}
            )
            _, _, issued = request("POST", f"{server.url}/api/v1/agents/bot/tokens", token=token)
            agent = json.loads(issued)["token"]
            url = f"{server.url}{PREFIX}/github/user"
            held: list[int] = []
            waiting = [
                threading.Thread(target=lambda: held.append(request("GET", url, token=agent)[0]))
                for _ in range(2)
            ]
            for thread in waiting:
                thread.start()
            deadline = time.monotonic() + 5
            while len(provider.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(provider.requests) == 2
            status, headers, content = request("GET", url, token=agent)
            assert status == 429
            assert json.loads(content)["code"] == "rate_limited"
            assert headers["Retry-After"] == "1"
            assert len(provider.requests) == 2  # the refused call reached no provider
            for thread in waiting:
                thread.join(10)
            assert held == [200, 200]
            provider.answer(200, {"ok": True})
            assert request("GET", url, token=agent)[0] == 200
    finally:
        provider.stop()


@pytest.mark.django_db
def test_an_override_to_get_on_a_request_with_a_body_is_refused(alice_api, provider_server):
    """A POST with `_method=GET` reaches a Rails-like provider as a GET with a body, which it
    reads as the start of the next request."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    grant(alice_api, "bot", ["github"])
    token = agent_token(alice_api, "bot")
    response = Client(raise_request_exception=False).post(
        f"{PREFIX}/github/repos/o/r/issues?_method=GET",
        b'{"title": "x"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert_problem(response, 400, "invalid_proxy_request")
    assert provider_server.requests == []
