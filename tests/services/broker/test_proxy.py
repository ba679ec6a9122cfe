"""Brokered access: an agent calls its provider through credvault and never holds
the secret. The provider is a real HTTP server on 127.0.0.1 (`provider_server`, the catalog's
base URLs pointed at it by CREDVAULT_PROVIDER_BASE_URLS): each test sees the request exactly as
the provider receives it, and what the agent gets back."""

from __future__ import annotations

import base64
import json
import logging
import secrets
import socket
import threading
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone

from providers import catalog as catalog_module
from providers.http import connections, resolving
from providers.http.addresses import is_public
from providers.http.connections import pools
from providers.http.failures import OutboundError
from providers.http.resolving import address_for
from services.models import AgentToken, AuditEvent
from services.rates import parse_rate
from tests.support.helpers import (
    CATALOG_ENTRY,
    PROXY_PREFIX,
    agent_token,
    call,
    creds,
    marked,
    put_agent,
    self_signed_certificate,
)
from tests.support.stand_ins import ProviderServer


@pytest.fixture
def github(alice_api, provider_server):
    """Alice's github set (a marked value) and her agent `bot` with a default grant."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    return value, agent_token(alice_api, "bot")


@pytest.mark.django_db
class TestTheCallAsTheProviderReceivesIt:
    def test_method_path_query_headers_credential_and_body(self, github, provider_server):
        value, token = github
        provider_server.answer(201, {"id": 7}, headers={"Content-Type": "application/json"})
        response = call(
            token,
            "POST",
            "github",
            "/repos/o/r/issues",
            query="per_page=5&q=a%20b",
            body=b'{"title":"hi"}',
            headers={
                "X-Custom": "kept",
                "Accept": "application/vnd.github+json",
                "Cookie": "session=agent",
                "X-Forwarded-For": "10.0.0.1",
                "X-Forwarded-Host": "evil.example",
                "Forwarded": "for=10.0.0.1",
                "X-Real-IP": "10.0.0.1",
                "Proxy-Authorization": "Basic eA==",
            },
        )
        assert response.status_code == 201
        assert response.json() == {"id": 7}
        [received] = provider_server.requests
        assert received.method == "POST"
        assert received.path == "/repos/o/r/issues?per_page=5&q=a%20b"
        assert received.body == b'{"title":"hi"}'
        headers = {name.lower(): v for name, v in received.headers.items()}
        assert headers["authorization"] == f"Bearer {value}"
        assert headers["x-custom"] == "kept"
        assert headers["content-type"] == "application/json"
        assert headers["host"] == provider_server.url.removeprefix("http://")
        for dropped in ("cookie", "x-forwarded-for", "x-forwarded-host", "forwarded"):
            assert dropped not in headers
        assert "x-real-ip" not in headers
        assert "proxy-authorization" not in headers

    def test_the_agents_own_authorization_never_arrives(self, github, provider_server):
        _, token = github
        call(token, "GET", "github", "/user")
        [received] = provider_server.requests
        assert token not in json.dumps(received.headers)

    def test_an_empty_path_is_the_base(self, github, provider_server):
        _, token = github
        assert call(token, "GET", "github", "/").status_code == 200
        assert provider_server.requests[0].path == "/"

    def test_head_and_every_method_pass(self, github, provider_server):
        _, token = github
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
            assert call(token, method, "github", "/x").status_code == 200
        assert [r.method for r in provider_server.requests] == [
            "GET",
            "HEAD",
            "POST",
            "PUT",
            "PATCH",
            "DELETE",
        ]

    def test_two_calls_share_one_kept_alive_connection(self, github, provider_server):
        _, token = github
        call(token, "GET", "github", "/a")
        call(token, "GET", "github", "/b")
        first, second = provider_server.requests
        assert first.peer_port == second.peer_port

    def test_a_call_starts_no_thread(self, github, provider_server, monkeypatch):
        """The whole-call deadline is one entry in the process's scheduler
        (providers/http/deadlines.py), not a thread and a timer per call; an address is not looked
        up."""
        _, token = github
        assert call(token, "GET", "github", "/user").status_code == 200  # the scheduler starts
        started = []
        real_start = threading.Thread.start
        monkeypatch.setattr(
            threading.Thread, "start", lambda self: started.append(self.name) or real_start(self)
        )
        for _ in range(20):
            assert call(token, "GET", "github", "/user").status_code == 200
        assert started == []
        assert len(provider_server.requests) == 21


def _catalog_cases() -> list:
    cases = []
    for provider in sorted(catalog_module.catalog().values(), key=lambda p: p.id):
        shape = next((s for s in provider.shapes if s.check is not None), None)
        if shape is not None and not provider.per_customer:
            cases.append(pytest.param(provider.id, shape, id=provider.id))
    return cases


@pytest.mark.django_db
@pytest.mark.parametrize(("provider_id", "shape"), _catalog_cases())
def test_every_provider_with_an_api_base_is_proxied_with_its_placement(
    alice_api, provider_server, provider_id, shape
):
    values = {name: marked(name) for name in sorted(shape.required)}
    assert alice_api.store(provider_id, creds(**values)).status_code == 201, provider_id
    assert put_agent(alice_api, "bot", [provider_id]).status_code == 201
    token = agent_token(alice_api, "bot")
    assert call(token, "GET", provider_id, "/probe").status_code == 200
    [received] = provider_server.requests
    headers = {name.lower(): v for name, v in received.headers.items()}
    auth = shape.check.auth
    if auth.type == "bearer":
        assert headers["authorization"] == f"Bearer {values[auth.field]}"
    elif auth.type == "header":
        assert headers[auth.header.lower()] == auth.prefix + values[auth.field]
    elif auth.type == "basic":
        username = values[auth.username] if auth.username else auth.username_value
        password = values.get(auth.password, "")
        pair = base64.b64encode(f"{username}:{password}".encode()).decode()
        assert headers["authorization"] == f"Basic {pair}"
    else:
        head = shape.check.path.partition("{" + auth.field + "}")[0]
        assert received.path == f"{head}{quote(values[auth.field], safe=':')}/probe"


SMUGGLED = [
    "/../admin",
    "/a/../../admin",
    "/%2e%2e/admin",
    "/%2E%2e/admin",
    "/.%2e/admin",
    "/./user",
    "/a%2F..%2Fb",
    "/a%2f.%2fb",
    "/a%2F%2Fb",
    "/%2F..%2Fadmin",
    "//evil.example/x",
    "/a//b",
    "/a\\b",
    "/a%5Cb",
    "/a%0Ab",
    "/a%0D%0Ab",
    "/a%00b",
    "/a%7Fb",
    "/a%C2%85b",
    "/https://evil.example/x",
    "/%ff",
]


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SMUGGLED)
def test_every_traversal_and_smuggling_spelling_is_refused_with_nothing_sent(
    github, provider_server, spelling
):
    _, token = github
    response = call(token, "GET", "github", "/x", raw=f"{PROXY_PREFIX}/github{spelling}")
    assert response.status_code == 400, spelling
    assert response.json()["code"] == "invalid_proxy_path"
    assert provider_server.requests == []
    [event] = AuditEvent.objects.filter(action="agent.proxy")
    assert (event.status, event.outcome, event.upstream_status) == (400, "refused", None)


@pytest.mark.django_db
def test_an_encoded_slash_in_the_service_segment_is_refused(github, provider_server):
    _, token = github
    response = call(token, "GET", "github", "/user", raw=f"{PROXY_PREFIX}/git%2Fhub/user")
    assert response.status_code == 400
    assert provider_server.requests == []


@pytest.mark.django_db
class TestTheGrant:
    def test_a_method_outside_the_grant_is_refused_with_nothing_sent(
        self, alice_api, provider_server
    ):
        alice_api.store("github", creds(api_key=marked()))
        grant = {"service": "github", "methods": ["GET"], "paths": ["/repos"]}
        assert put_agent(alice_api, "bot", [grant]).status_code == 201
        token = agent_token(alice_api, "bot")
        assert call(token, "GET", "github", "/repos/o/r").status_code == 200
        assert call(token, "GET", "github", "/repos").status_code == 200
        for method, path in (("DELETE", "/repos/o/r"), ("GET", "/user"), ("GET", "/reposx")):
            response = call(token, method, "github", path)
            assert response.status_code == 403, (method, path)
            assert response.json()["code"] == "not_granted"
        assert len(provider_server.requests) == 2

    def test_no_grant_and_nothing_stored(self, alice_api, provider_server):
        assert put_agent(alice_api, "bot", ["github"]).status_code == 201
        token = agent_token(alice_api, "bot")
        assert call(token, "GET", "gitlab", "/x").json()["code"] == "not_granted"
        response = call(token, "GET", "github", "/x")
        assert response.status_code == 404
        assert response.json()["code"] == "service_not_connected"
        assert provider_server.requests == []


@pytest.mark.django_db
class TestRevocationRefusesTheVeryNextCall:
    def _revoke_and_call(self, alice_api, provider_server, github, revoke):
        _, token = github
        assert call(token, "GET", "github", "/user").status_code == 200
        revoke(alice_api, token)
        response = call(token, "GET", "github", "/user")
        assert len(provider_server.requests) == 1
        return response

    def test_deleted_agent(self, alice_api, provider_server, github):
        response = self._revoke_and_call(
            alice_api,
            provider_server,
            github,
            lambda api, _: api.raw("DELETE", "/api/v1/agents/bot"),
        )
        assert response.status_code == 401

    def test_revoked_token(self, alice_api, provider_server, github):
        def revoke(api, token):
            prefix = token[:12]
            assert api.raw("DELETE", f"/api/v1/agents/bot/tokens/{prefix}").status_code == 204

        assert self._revoke_and_call(alice_api, provider_server, github, revoke).status_code == 401

    def test_removed_grant(self, alice_api, provider_server, github):
        response = self._revoke_and_call(
            alice_api, provider_server, github, lambda api, _: put_agent(api, "bot", ["gitlab"])
        )
        assert response.json()["code"] == "not_granted"

    def test_expired_token(self, alice_api, provider_server, github):
        def expire(api, token):
            AgentToken.objects.filter(prefix=token[:12]).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )

        assert self._revoke_and_call(alice_api, provider_server, github, expire).status_code == 401

    def test_removed_service(self, alice_api, provider_server, github):
        response = self._revoke_and_call(
            alice_api, provider_server, github, lambda api, _: api.delete("github")
        )
        assert response.json()["code"] == "service_not_connected"


@pytest.mark.django_db
class TestTheAnswer:
    def test_a_redirect_is_passed_back_and_not_followed(self, github, provider_server):
        # A redirect that stays under the service's API base; one that leaves it is followed
        # without the credential or refused (tests/services/broker/test_foreign_redirects.py).
        _, token = github
        provider_server.answer(302, b"", headers={"Location": f"{provider_server.url}/login"})
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 302
        assert response["Location"] == f"http://testserver{PROXY_PREFIX}/github/login"
        assert len(provider_server.requests) == 1

    def test_an_echoed_value_is_redacted_in_body_and_headers(self, github, provider_server):
        value, token = github
        provider_server.answer(
            200,
            f'{{"you":"{value}","encoded":"{quote(value, safe="")}"}}'.encode(),
            headers={
                "Content-Type": "application/json",
                "X-Echo": f"Bearer {value}",
                "Set-Cookie": "provider=1",
            },
        )
        response = call(token, "GET", "github", "/user")
        assert value not in response.content.decode()
        assert response.json() == {"you": "[REDACTED]", "encoded": "[REDACTED]"}
        assert response["X-Echo"] == "Bearer [REDACTED]"
        assert "Set-Cookie" not in response
        assert not response.cookies

    def test_a_basic_auth_pair_echoed_in_base64_is_redacted_and_its_identifier_is_not(
        self, alice_api, provider_server
    ):
        sid, secret = "AC" + secrets.token_hex(16), marked("tok")
        assert alice_api.store("twilio", creds(account_sid=sid, auth_token=secret)).status_code
        put_agent(alice_api, "bot", ["twilio"])
        token = agent_token(alice_api, "bot")
        pair = base64.b64encode(f"{sid}:{secret}".encode()).decode()
        provider_server.answer(200, f"auth was Basic {pair}; sid {sid}; token {secret}".encode())
        response = call(token, "GET", "twilio", "/x")
        assert response.content == (
            f"auth was Basic [REDACTED]; sid {sid}; token [REDACTED]".encode()
        )

    def test_a_provider_silent_past_the_timeout_is_504(self, github, provider_server, settings):
        settings.CREDVAULT_PROXY_TIMEOUT = 0.5
        _, token = github
        provider_server.answer(200, b"{}", delay_seconds=3)
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 504
        assert response.json()["code"] == "upstream_timeout"

    def test_the_timeout_bounds_each_silence_not_the_answer(
        self, github, provider_server, settings
    ):
        settings.CREDVAULT_PROXY_TIMEOUT = 0.5
        _, token = github
        provider_server.answer(200, b'{"a": 1}', drip_seconds=0.2)  # 1.6 s in all
        response = call(token, "GET", "github", "/user")
        assert (response.status_code, response.content) == (200, b'{"a": 1}')

    def test_a_provider_dripping_past_the_whole_bound_is_504(
        self, github, provider_server, settings
    ):
        settings.CREDVAULT_PROXY_TIMEOUT = 0.5
        settings.CREDVAULT_PROXY_MAX_DURATION = 1
        _, token = github
        provider_server.answer(200, b'{"pad": "xxxxxxxx"}', drip_seconds=0.2)
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 504
        assert response.json()["code"] == "upstream_timeout"

    def test_an_oversize_answer_is_502(self, github, provider_server, settings):
        settings.CREDVAULT_PROXY_MAX_RESPONSE = 1000
        _, token = github
        provider_server.answer(200, b"x" * 1001)
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 502
        assert response.json()["code"] == "upstream_too_large"

    def test_a_refused_connection_is_502(self, github, settings):
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": f"http://127.0.0.1:{port}"})
        _, token = github
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 502
        assert response.json()["code"] == "upstream_unavailable"

    def test_a_body_over_the_limit_is_413_with_nothing_sent(
        self, github, provider_server, settings
    ):
        settings.CREDVAULT_PROXY_MAX_BODY = 10
        _, token = github
        response = call(token, "POST", "github", "/x", body=b"x" * 11)
        assert response.status_code == 413
        assert provider_server.requests == []


@pytest.mark.django_db
class TestAddresses:
    """The catalog's own hosts (no override) must resolve to public addresses only."""

    @pytest.mark.parametrize(
        "answer",
        [
            ["10.0.0.5"],
            ["127.0.0.1"],
            ["169.254.169.254"],
            ["0.0.0.0"],  # noqa: S104 - an answer of the resolver, not a bind
            ["::1"],
            ["::ffff:127.0.0.1"],
            ["fd00:ec2::254"],
            ["100.100.100.200"],
            ["140.82.112.5", "192.168.1.1"],
        ],
    )
    def test_a_name_resolving_to_a_private_address_is_refused(self, alice_api, monkeypatch, answer):
        alice_api.store("github", creds(api_key=marked()))
        put_agent(alice_api, "bot", ["github"])
        token = agent_token(alice_api, "bot")
        asked = []
        monkeypatch.setattr(
            resolving, "resolver", lambda host, port: asked.append((host, port)) or answer
        )
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 502
        assert response.json()["code"] == "upstream_unavailable"
        assert asked == [("api.github.com", 443)]

    @pytest.mark.parametrize(
        ("address", "public"),
        [("140.82.112.5", True), ("2606:4700::1111", True), ("10.1.2.3", False)],
    )
    def test_is_public(self, address, public):
        assert is_public(address) is public


@pytest.mark.django_db
class TestAuditAndSecrets:
    def test_one_event_per_call_with_no_value_anywhere(self, github, provider_server, caplog):
        value, token = github
        caplog.set_level(logging.DEBUG)
        provider_server.answer(404, {"message": "Not Found"})
        response = call(token, "GET", "github", "/repos/o/missing", query="ref=main")
        assert response.status_code == 404
        [event] = AuditEvent.objects.filter(action="agent.proxy")
        assert (event.method, event.path, event.upstream_status) == ("GET", "/repos/o/missing", 404)
        assert (event.service, event.outcome, event.status, event.agent_name) == (
            "github",
            "success",
            404,
            "bot",
        )
        everything = json.dumps(
            list(AuditEvent.objects.values()) + [record.getMessage() for record in caplog.records],
            default=str,
        )
        assert value not in everything
        assert "ref=main" not in event.path

    def test_the_rate_limit_per_agent_token(self, github, provider_server, settings):
        settings.CREDVAULT_PROXY_RATE_LIMIT = parse_rate("2/min")
        _, token = github
        statuses = [call(token, "GET", "github", "/user").status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        assert len(provider_server.requests) == 2


@pytest.mark.django_db
class TestTheExtraCatalog:
    # A valid catalog entry, as an operator's internal API.
    ENTRY = CATALOG_ENTRY.replace('id = "example"', 'id = "internal-billing"')

    @pytest.fixture
    def extra(self, settings, tmp_path):
        path = tmp_path / "extra.toml"
        path.write_text(self.ENTRY)
        settings.CREDVAULT_EXTRA_CATALOG = str(path)
        catalog_module.catalog.cache_clear()
        yield path
        settings.CREDVAULT_EXTRA_CATALOG = ""
        catalog_module.catalog.cache_clear()

    def test_an_operator_entry_is_proxied(self, extra, alice_api, provider_server, settings):
        assert catalog_module.get("internal-billing").operator
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(
            {"internal-billing": provider_server.url}
        )
        value = marked("billing")
        alice_api.store("internal-billing", creds(api_key=value))
        put_agent(alice_api, "bot", ["internal-billing"])
        token = agent_token(alice_api, "bot")
        response = call(token, "GET", "internal-billing", "/invoices")
        assert response.status_code == 200
        assert provider_server.requests[-1].headers["Authorization"] == f"Bearer {value}"

    def test_an_operator_entrys_host_may_be_private(self, extra, monkeypatch):
        monkeypatch.setattr(resolving, "resolver", lambda host, port: ["10.0.0.5"])
        from services.broker.destination import destination_for

        destination = destination_for(catalog_module.get("internal-billing"))
        assert destination.configured
        assert address_for(destination, seconds=1) == "10.0.0.5"
        github = destination_for(catalog_module.get("github"))
        with pytest.raises(OutboundError):
            address_for(github, seconds=1)

    def test_an_invalid_entry_names_the_entry_and_the_field(self, extra):
        extra.write_text(self.ENTRY.replace('category = "developer"', 'category = "x"'))
        catalog_module.catalog.cache_clear()
        with pytest.raises(catalog_module.CatalogError) as raised:
            catalog_module.catalog()
        assert "CREDVAULT_EXTRA_CATALOG" in str(raised.value)
        assert "internal-billing" in str(raised.value)
        assert "category" in str(raised.value)

    def test_an_entry_may_not_replace_one_of_credvaults(self, extra):
        extra.write_text(self.ENTRY.replace('id = "internal-billing"', 'id = "github"'))
        catalog_module.catalog.cache_clear()
        with pytest.raises(catalog_module.CatalogError, match="already in credvault's catalog"):
            catalog_module.catalog()

    def test_a_custom_service_outside_the_catalog_cannot_be_proxied(
        self, alice_api, provider_server
    ):
        alice_api.store("my-internal", creds(api_key=marked()))
        put_agent(alice_api, "bot", ["my-internal"])
        token = agent_token(alice_api, "bot")
        response = call(token, "GET", "my-internal", "/x")
        assert response.status_code == 409
        assert response.json()["code"] == "not_proxyable"
        assert provider_server.requests == []


@pytest.mark.django_db
def test_a_certificate_no_authority_signed_is_refused_with_nothing_answered(
    github, settings, tmp_path
):
    """TLS is verified (certifi's bundle only): a provider stand-in on HTTPS with a
    self-signed certificate gets no request through, and the agent gets 502."""
    import ssl

    provider = ProviderServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed_certificate(tmp_path))
    provider.httpd.socket = context.wrap_socket(provider.httpd.socket, server_side=True)
    provider.start()
    try:
        port = provider.httpd.server_address[1]
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": f"https://127.0.0.1:{port}"})
        _, token = github
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 502
        assert response.json()["code"] == "upstream_unavailable"
        assert provider.requests == []
    finally:
        provider.stop()


# --- a connection's own API host ---------------------------------------------------------------

INSTANCE = "acme.my.salesforce.com"
PIPEDRIVE_COMPANY = "acme.pipedrive.com"
# A name under the pattern that the stand-in's certificate does not cover.
OTHER_INSTANCE = "other.my.salesforce.com"


def _authority_and_certificate(tmp_path, names: list[str]) -> tuple[str, str, str]:
    """A test certificate authority and a server certificate it signed for `names`: files
    for ssl (authority, certificate, key)."""
    from datetime import UTC, datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "credvault test authority")])
    authority = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp_path / "authority.pem", tmp_path / "server.pem", tmp_path / "server-key.pem"
    paths[0].write_bytes(authority.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(paths[0]), str(paths[1]), str(paths[2])


def _serve_own_hosts(tmp_path, monkeypatch, *, loopback_is_public: bool):
    """The connections' own API hosts, served by one HTTPS stand-in on 127.0.0.1: the test
    network resolves their names there and leads port 443 to the stand-in's port, and the
    outbound client trusts the test authority that signed the stand-in's certificate (for
    acme.my.salesforce.com and acme.pipedrive.com). TLS is still checked against the name,
    and the name still resolved once; with `loopback_is_public`, 127.0.0.1 also counts as a
    public address, as a real org's address would."""
    import dataclasses
    import ssl

    authority, certificate, key = _authority_and_certificate(
        tmp_path, [INSTANCE, PIPEDRIVE_COMPANY]
    )
    server = ProviderServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    server.start()
    port = server.httpd.server_address[1]
    names = {INSTANCE, PIPEDRIVE_COMPANY, OTHER_INSTANCE}
    server.asked = []

    def resolve(host: str, wanted: int) -> list[str]:
        server.asked.append(host)
        if host not in names:
            raise OSError("no such name on the test network")
        return ["127.0.0.1"]

    real_public, real_get = is_public, pools.get
    monkeypatch.setattr(resolving, "resolver", resolve)
    monkeypatch.setattr(
        connections, "tls_context", lambda: ssl.create_default_context(cafile=authority)
    )
    monkeypatch.setattr(
        pools,
        "get",
        lambda destination, address, key=(): real_get(
            dataclasses.replace(destination, port=port)
            if destination.host in names and destination.port == 443
            else destination,
            address,
            key,
        ),
    )
    if loopback_is_public:
        monkeypatch.setattr(resolving, "is_public", lambda a: a == "127.0.0.1" or real_public(a))
    pools.clear()
    return server


@pytest.fixture
def own_hosts(tmp_path, monkeypatch):
    server = _serve_own_hosts(tmp_path, monkeypatch, loopback_is_public=True)
    yield server
    pools.clear()
    server.stop()


@pytest.fixture
def own_hosts_on_loopback(tmp_path, monkeypatch):
    """The same stand-in, where 127.0.0.1 is what it is: not a public address."""
    server = _serve_own_hosts(tmp_path, monkeypatch, loopback_is_public=False)
    yield server
    pools.clear()
    server.stop()


def salesforce_set(instance_url: str = f"https://{INSTANCE}") -> tuple[str, list]:
    token = marked("sf-access")
    return token, creds(access_token=token, instance_url=instance_url)


@pytest.mark.django_db
class TestTheConnectionsApiHost:
    def test_the_test_operation_checks_the_set_at_its_instance(self, alice_api, own_hosts):
        token, values = salesforce_set()
        response = alice_api.test("salesforce", values)
        assert response.json() == {"ok": True, "verified": True, "reason": "accepted"}
        [received] = own_hosts.requests
        assert received.path == "/services/oauth2/userinfo"
        assert received.headers["Host"] == INSTANCE
        assert received.headers["Authorization"] == f"Bearer {token}"
        assert own_hosts.asked == [INSTANCE]

    def test_a_brokered_call_goes_to_the_connections_instance(self, alice_api, own_hosts):
        token, values = salesforce_set()
        assert alice_api.store("salesforce", values).status_code == 201
        assert put_agent(alice_api, "bot", ["salesforce"]).status_code == 201
        own_hosts.answer(200, {"sobjects": []})
        agent = agent_token(alice_api, "bot")
        response = call(agent, "GET", "salesforce", "/services/data")
        assert response.status_code == 200
        assert response.json() == {"sobjects": []}
        [received] = own_hosts.requests
        assert (received.method, received.path) == ("GET", "/services/data")
        assert received.headers["Host"] == INSTANCE
        assert received.headers["Authorization"] == f"Bearer {token}"
        # The TLS connection is kept for the next call to the same host.
        assert call(agent, "GET", "salesforce", "/services/data/v62.0").status_code == 200
        first, second = own_hosts.requests
        assert first.peer_port == second.peer_port

    def test_pipedrive_calls_go_to_the_companys_api_domain(self, alice_api, own_hosts):
        token = marked("pd-access")
        values = creds(access_token=token, api_domain=f"https://{PIPEDRIVE_COMPANY}")
        assert alice_api.store("pipedrive", values).status_code == 201
        assert put_agent(alice_api, "bot", ["pipedrive"]).status_code == 201
        response = call(agent_token(alice_api, "bot"), "GET", "pipedrive", "/api/v2/deals")
        assert response.status_code == 200
        [received] = own_hosts.requests
        assert received.path == "/api/v2/deals"
        assert received.headers["Host"] == PIPEDRIVE_COMPANY

    def test_the_operators_base_url_wins_over_the_connections_host(
        self, alice_api, own_hosts, provider_server
    ):
        """provider_server sets CREDVAULT_PROVIDER_BASE_URLS for every provider."""
        _, values = salesforce_set()
        assert alice_api.test("salesforce", values).json()["reason"] == "accepted"
        assert alice_api.store("salesforce", values).status_code == 201
        assert put_agent(alice_api, "bot", ["salesforce"]).status_code == 201
        call(agent_token(alice_api, "bot"), "GET", "salesforce", "/services/data")
        assert [r.path for r in provider_server.requests] == [
            "/services/oauth2/userinfo",
            "/services/data",
        ]
        assert own_hosts.requests == []
        assert own_hosts.asked == []

    def test_the_connections_host_must_have_a_public_address(
        self, alice_api, own_hosts_on_loopback
    ):
        _, values = salesforce_set()
        assert alice_api.test("salesforce", values).json()["reason"] == "provider_unavailable"
        assert alice_api.store("salesforce", values).status_code == 201
        assert put_agent(alice_api, "bot", ["salesforce"]).status_code == 201
        response = call(agent_token(alice_api, "bot"), "GET", "salesforce", "/services/data")
        assert response.status_code == 502
        assert response.json()["code"] == "upstream_unavailable"
        assert own_hosts_on_loopback.requests == []
        assert own_hosts_on_loopback.asked == [INSTANCE, INSTANCE]

    def test_tls_is_checked_against_the_connections_host(self, alice_api, own_hosts):
        """A name under the pattern, served with a certificate for another name."""
        _, values = salesforce_set(f"https://{OTHER_INSTANCE}")
        assert alice_api.test("salesforce", values).json()["reason"] == "provider_unavailable"
        assert own_hosts.requests == []
        assert own_hosts.asked == [OTHER_INSTANCE]

    def test_without_its_host_a_salesforce_set_has_no_check_and_no_destination(
        self, alice_api, own_hosts
    ):
        token = marked("sf-access")
        response = alice_api.test("salesforce", creds(access_token=token))
        assert response.json()["reason"] == "no_verifier"
        assert alice_api.store("salesforce", creds(access_token=token)).status_code == 201
        assert put_agent(alice_api, "bot", ["salesforce"]).status_code == 201
        response = call(agent_token(alice_api, "bot"), "GET", "salesforce", "/services/data")
        assert response.status_code == 409
        assert response.json()["code"] == "not_proxyable"
        assert own_hosts.asked == []


BAD_HOSTS = [
    "https://evil.example",
    "https://acme.my.salesforce.com.evil.example",
    "http://acme.my.salesforce.com",
    "https://acme.my.salesforce.com:8443",
    "https://acme.my.salesforce.com/services/data",
    "https://attacker@acme.my.salesforce.com",
    "https://127.0.0.1",
]


@pytest.mark.django_db
@pytest.mark.parametrize("instance_url", BAD_HOSTS)
def test_a_set_naming_another_host_is_refused_naming_the_field(alice_api, instance_url):
    token = marked("sf-access")
    values = creds(access_token=token, instance_url=instance_url)
    response = alice_api.store("salesforce", values)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    [error] = body["errors"]
    assert error["field"] == "credentials[1].value"
    assert error["code"] == "invalid"
    assert "instance_url" in error["message"]
    assert "*.my.salesforce.com" in error["message"]
    assert instance_url not in response.content.decode()
    assert token not in response.content.decode()
    assert alice_api.list().json() == []
    assert alice_api.test("salesforce", values).status_code == 400


@pytest.mark.django_db
def test_a_pipedrive_set_naming_another_domain_is_refused(alice_api):
    values = creds(access_token=marked(), api_domain="https://acme.pipedrive.com.evil.example")
    response = alice_api.store("pipedrive", values)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "credentials[1].value"
    assert "api_domain" in response.json()["errors"][0]["message"]
