"""Providers with more than one host (docs/providers.md#providers-with-more-than-one-host): a
catalog entry's other bases, reached at `/proxy/{service}~{base}/{path}`, and a host of the
entry's host pattern, reached at `/proxy/{service}~host/{host}/{path}`; grants that name one
base; the server's replacements (CREDVAULT_PROVIDER_BASE_URLS' `id~base`,
CREDVAULT_PROVIDER_HOST_PATTERNS) and their system checks; the same through MCP's call_api.

Each provider is a real HTTP server on 127.0.0.1 (`tests/support/stand_ins.py`). A pattern host
(`idx-1.svc.test.pinecone.io`) cannot be given to DNS by a test: the outbound client's
resolver, which tests replace, answers 127.0.0.1 for it, so that everything after the lookup
(the pattern, the address rules, CREDVAULT_OUTBOUND_ALLOWED_HOSTS, the Host header) is real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from providers.catalog import CatalogError, parse_catalog, parse_host_pattern
from providers.http import resolving
from services import checks
from services.models import AuditEvent, Grant
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

INDEX_HOST = "idx-1.svc.test.pinecone.io"


@pytest.fixture
def servers(settings) -> Iterator[tuple[ProviderServer, ProviderServer]]:
    """Two stand-ins: every provider's API base at the first; Hugging Face's `router` and
    Dropbox's `content` bases at the second, by their server-side replacements."""
    main, other = ProviderServer().start(), ProviderServer().start()
    settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(
        {
            "huggingface": main.url,
            "huggingface~router": other.url + "/hf",
            "dropbox": main.url,
            "dropbox~content": other.url,
            "pinecone": main.url,
            "github": main.url,
        }
    )
    yield main, other
    main.stop()
    other.stop()


@pytest.fixture
def index_host(settings, monkeypatch, servers) -> ProviderServer:
    """Pinecone's index hosts at the second stand-in: the pattern given with its scheme and
    port, the index's name allowed to reach a loopback address, and the name resolved to
    127.0.0.1 (as DNS would, were it a real index)."""
    _, other = servers
    port = int(other.url.rsplit(":", 1)[1])
    settings.CREDVAULT_PROVIDER_HOST_PATTERNS = json.dumps(
        {"pinecone": f"http://*.svc.*.pinecone.io:{port}"}
    )
    settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS = f"{INDEX_HOST}:{port}"
    monkeypatch.setattr(resolving, "resolver", _loopback_for(INDEX_HOST))
    return other


def _loopback_for(name: str):
    real = resolving.resolver

    def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == name else real(host, port)

    return resolve


@pytest.fixture
def agent(alice_api, servers) -> dict[str, str]:
    """Alice's huggingface, dropbox, pinecone and github sets, and her agent `bot` with a
    default grant of each: the stored values and the agent token."""
    values = {service: marked(service) for service in ("huggingface", "pinecone", "github")}
    for service, value in values.items():
        assert alice_api.store(service, creds(api_key=value)).status_code == 201
    values["dropbox"] = marked("dropbox")
    assert alice_api.store("dropbox", creds(access_token=values["dropbox"])).status_code == 201
    assert put_agent(alice_api, "bot", list(values), access=None).status_code == 201
    values["token"] = agent_token(alice_api, "bot")
    return values


def last_event() -> AuditEvent:
    return AuditEvent.objects.filter(action="agent.proxy").order_by("-id").first()


@pytest.mark.django_db
class TestNamedBases:
    def test_a_named_base_is_called_with_the_same_credential(self, agent, servers):
        main, other = servers
        other.answer(200, {"choices": []})
        response = call(
            agent["token"], "POST", "huggingface~router", "/v1/chat/completions", body=b"{}"
        )
        assert response.status_code == 200
        assert response.json() == {"choices": []}
        assert main.requests == []
        [received] = other.requests
        assert received.path == "/hf/v1/chat/completions"
        assert received.headers["Authorization"] == f"Bearer {agent['huggingface']}"
        event = last_event()
        assert (event.service, event.path, event.status) == (
            "huggingface",
            "~router/v1/chat/completions",
            200,
        )

    def test_the_api_base_is_unchanged(self, agent, servers):
        main, other = servers
        assert call(agent["token"], "GET", "huggingface", "/api/whoami-v2").status_code == 200
        assert [r.path for r in main.requests] == ["/api/whoami-v2"]
        assert other.requests == []
        assert last_event().path == "/api/whoami-v2"

    def test_dropbox_content_base(self, agent, servers):
        _, other = servers
        other.answer(200, b"file bytes", headers={"Content-Type": "application/octet-stream"})
        response = call(agent["token"], "POST", "dropbox~content", "/2/files/download")
        assert (response.status_code, response.content) == (200, b"file bytes")
        [received] = other.requests
        assert received.path == "/2/files/download"
        assert received.headers["Authorization"] == f"Bearer {agent['dropbox']}"

    def test_addresses_under_the_base_move_onto_its_proxy_url(self, agent, servers):
        _, other = servers
        other.answer(
            302,
            b"",
            headers={
                "Location": f"{other.url}/hf/v1/next?page=2",
                "Link": f'<{other.url}/hf/v1/models?page=3>; rel="next"',
            },
        )
        response = call(agent["token"], "GET", "huggingface~router", "/v1/models")
        assert response.status_code == 302
        proxy = f"http://testserver{PROXY_PREFIX}/huggingface~router"
        assert response["Location"] == f"{proxy}/v1/next?page=2"
        assert response["Link"] == f'<{proxy}/v1/models?page=3>; rel="next"'

    @pytest.mark.parametrize(
        "segment",
        ["huggingface~nope", "huggingface~", "huggingface~Router", "github~router", "x~router"],
    )
    def test_a_base_the_catalog_does_not_give_is_refused(self, agent, servers, segment):
        response = call(agent["token"], "GET", segment, "/v1/models")
        problem = assert_problem(response, 400, "invalid_proxy_path")
        assert response["X-Credvault-Error"] == "invalid_proxy_path"
        assert "base" in problem["detail"] or "`~`" in problem["detail"]
        assert servers[0].requests == servers[1].requests == []

    def test_the_refusal_is_audited_under_the_service_with_the_agents_spelling(
        self, agent, servers
    ):
        call(agent["token"], "GET", "huggingface~nope", "/v1/models")
        event = last_event()
        assert (event.service, event.path, event.status) == ("huggingface", "~nope/v1/models", 400)

    def test_a_custom_service_has_no_bases(self, alice_api, servers):
        assert alice_api.store("my-thing", creds(api_key=marked())).status_code == 201
        assert put_agent(alice_api, "bot", ["my-thing"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        assert_problem(call(token, "GET", "my-thing~api", "/x"), 400, "invalid_proxy_path")
        assert_problem(
            call(token, "GET", "my-thing~host", "/a.b.example.com/x"), 400, "invalid_proxy_path"
        )
        # Without a base: the service has no destination, as before.
        assert_problem(call(token, "GET", "my-thing", "/x"), 409, "not_proxyable")


@pytest.mark.django_db
class TestHostPatterns:
    def test_a_host_the_pattern_matches_is_called(self, agent, index_host, servers):
        index_host.answer(200, {"matches": []})
        # The Pinecone SDK sends its key as `Api-Key`: the agent token is read there too.
        response = Client(raise_request_exception=False).post(
            f"{PROXY_PREFIX}/pinecone~host/{INDEX_HOST}/query",
            b'{"topK":1}',
            content_type="application/json",
            headers={"Api-Key": agent["token"]},
        )
        assert response.status_code == 200, response.content
        assert response.json() == {"matches": []}
        [received] = index_host.requests
        assert received.path == "/query"
        assert received.headers["Api-Key"] == agent["pinecone"]
        assert received.headers["Host"] == f"{INDEX_HOST}:{index_host.url.rsplit(':', 1)[1]}"
        assert servers[0].requests == []
        event = last_event()
        assert (event.service, event.path) == ("pinecone", f"~host/{INDEX_HOST}/query")

    def test_the_host_is_matched_without_case_and_sent_in_lower_case(self, agent, index_host):
        response = call(agent["token"], "GET", "pinecone~host", f"/{INDEX_HOST.upper()}/x")
        assert response.status_code == 200
        assert index_host.requests[0].headers["Host"].startswith(INDEX_HOST + ":")

    def test_addresses_move_onto_the_hosts_proxy_url(self, agent, index_host):
        port = index_host.url.rsplit(":", 1)[1]
        index_host.answer(200, b"{}", headers={"Location": f"http://{INDEX_HOST}:{port}/next"})
        response = call(agent["token"], "GET", "pinecone~host", f"/{INDEX_HOST}/describe")
        assert response["Location"] == (
            f"http://testserver{PROXY_PREFIX}/pinecone~host/{INDEX_HOST}/next"
        )

    @pytest.mark.parametrize(
        "host",
        [
            "evil.example.com",
            "a.b.svc.test.pinecone.io",  # `*` is one label, never two
            "svc.test.pinecone.io",
            "idx-1.svc.test.pinecone.io.",
            "idx-1.svc.test.pinecone.io.evil.com",
            "-idx.svc.test.pinecone.io",
        ],
    )
    def test_a_host_the_pattern_does_not_match_is_refused(self, agent, index_host, host):
        response = call(agent["token"], "GET", "pinecone~host", f"/{host}/query")
        problem = assert_problem(response, 400, "invalid_proxy_path")
        assert "pattern" in problem["detail"]
        assert index_host.requests == []

    @pytest.mark.parametrize(
        "host",
        [
            f"{INDEX_HOST}:443",
            f"user@{INDEX_HOST}",
            f"user:pw@{INDEX_HOST}",
            "127.0.0.1",
            "[::1]",
            "1.2.3.4",
            "%69dx-1.svc.test.pinecone.io",
            "",
        ],
    )
    def test_a_port_user_info_or_address_in_the_host_is_refused(self, agent, index_host, host):
        response = call(
            agent["token"],
            "GET",
            "pinecone~host",
            "/x",
            raw=f"{PROXY_PREFIX}/pinecone~host/{host}/query",
        )
        assert_problem(response, 400, "invalid_proxy_path")
        assert index_host.requests == []

    def test_a_host_form_for_a_provider_without_a_pattern_is_refused(self, agent, servers):
        response = call(agent["token"], "GET", "huggingface~host", "/router.huggingface.co/x")
        assert_problem(response, 400, "invalid_proxy_path")
        assert servers[0].requests == servers[1].requests == []

    def test_a_private_address_is_refused_unless_allowed(self, agent, index_host, settings):
        # The catalog's own pattern: https, and the index name resolves to a loopback address.
        settings.CREDVAULT_PROVIDER_HOST_PATTERNS = "{}"
        response = call(agent["token"], "GET", "pinecone~host", f"/{INDEX_HOST}/query")
        assert_problem(response, 502, "upstream_unavailable")
        assert index_host.requests == []

    def test_plain_http_is_refused_unless_allowed(self, agent, index_host, settings):
        settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS = ""
        response = call(agent["token"], "GET", "pinecone~host", f"/{INDEX_HOST}/query")
        assert_problem(response, 409, "not_proxyable")
        assert index_host.requests == []

    def test_the_path_below_the_host_is_checked_as_any(self, agent, index_host):
        response = call(
            agent["token"],
            "GET",
            "pinecone~host",
            "/x",
            raw=f"{PROXY_PREFIX}/pinecone~host/{INDEX_HOST}/a/../../admin",
        )
        assert_problem(response, 400, "invalid_proxy_path")
        assert index_host.requests == []


@pytest.mark.django_db
class TestGrantsOfOneBase:
    def test_a_grant_naming_a_base_covers_that_base_only(self, agent, alice_api, servers):
        main, other = servers
        grants = [{"service": "huggingface", "base": "router"}]
        response = put_agent(alice_api, "bot", grants, access=None)
        assert response.status_code == 200
        assert response.json()["services"] == [
            {
                "service": "huggingface",
                "access": "proxy",
                "methods": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
                "paths": ["/"],
                "graphql": [],
                "base": "router",
            }
        ]
        assert list(Grant.objects.values_list("service", "base")) == [("huggingface", "router")]
        token = agent["token"]
        assert call(token, "GET", "huggingface~router", "/v1/models").status_code == 200
        refused = call(token, "GET", "huggingface", "/api/whoami-v2")
        problem = assert_problem(refused, 403, "not_granted")
        assert "base" in problem["detail"]
        assert main.requests == []
        assert len(other.requests) == 1

    def test_a_grant_of_the_host_form_refuses_the_api_base(self, agent, alice_api, index_host):
        grants = [{"service": "pinecone", "base": "host", "methods": ["POST"]}]
        assert put_agent(alice_api, "bot", grants, access=None).status_code == 200
        token = agent["token"]
        assert call(token, "POST", "pinecone~host", f"/{INDEX_HOST}/query").status_code == 200
        assert_problem(call(token, "POST", "pinecone", "/indexes"), 403, "not_granted")
        assert len(index_host.requests) == 1

    def test_a_grant_without_a_base_covers_every_base(self, agent, index_host):
        token = agent["token"]
        assert call(token, "GET", "pinecone", "/indexes").status_code == 200
        assert call(token, "GET", "pinecone~host", f"/{INDEX_HOST}/x").status_code == 200
        assert call(token, "GET", "huggingface~router", "/v1/models").status_code == 200

    def test_grant_paths_apply_below_the_base(self, agent, alice_api, index_host):
        grants = [{"service": "pinecone", "base": "host", "paths": ["/query"]}]
        assert put_agent(alice_api, "bot", grants, access=None).status_code == 200
        token = agent["token"]
        assert call(token, "POST", "pinecone~host", f"/{INDEX_HOST}/query").status_code == 200
        refused = call(token, "POST", "pinecone~host", f"/{INDEX_HOST}/vectors/delete")
        assert_problem(refused, 403, "not_granted")

    @pytest.mark.parametrize(
        ("grant", "message"),
        [
            ({"service": "huggingface", "base": "nope"}, "one of router"),
            ({"service": "pinecone", "base": "router"}, "one of host"),
            ({"service": "github", "base": "router"}, "none"),
            ({"service": "my-thing", "base": "host"}, "none"),
        ],
    )
    def test_a_base_the_service_does_not_have_is_refused(self, alice_api, grant, message):
        response = put_agent(alice_api, "bot", [grant], access=None)
        problem = assert_problem(response, 400, "invalid_request")
        [error] = problem["errors"]
        assert error["field"] == "services[0].base"
        assert message in error["message"]
        assert not Grant.objects.exists()

    def test_a_base_must_be_a_string(self, alice_api):
        response = put_agent(alice_api, "bot", [{"service": "huggingface", "base": 1}])
        problem = assert_problem(response, 400, "invalid_request")
        assert problem["errors"][0]["field"] == "services[0].base"
        assert not Grant.objects.exists()

    def test_the_agent_list_shows_the_base(self, alice_api):
        grants = [{"service": "huggingface", "base": "router"}, "github"]
        assert put_agent(alice_api, "bot", grants, access=None).status_code == 201
        [listed] = alice_api.raw("GET", "/api/v1/agents").json()
        assert [grant.get("base") for grant in listed["services"]] == [None, "router"]


def tool(token: str, name: str, arguments: dict) -> dict:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = Client(raise_request_exception=False).post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
            "MCP-Protocol-Version": "2025-11-25",
        },
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.mark.django_db
class TestThroughMcp:
    def test_call_api_takes_a_base_after_the_service(self, agent, servers, settings):
        settings.CREDVAULT_PUBLIC_URL = "https://credvault.example"
        _, other = servers
        other.answer(200, {"id": "chat-1"}, headers={"Location": f"{other.url}/hf/v1/c/1"})
        arguments = {
            "service": "huggingface~router",
            "method": "POST",
            "path": "/v1/chat/completions",
            "body": {"model": "m", "messages": []},
        }
        result = tool(agent["token"], "call_api", arguments)
        assert result["isError"] is False
        structured = result["structuredContent"]
        assert json.loads(structured["body"]) == {"id": "chat-1"}
        assert structured["headers"]["location"] == (
            f"https://credvault.example{PROXY_PREFIX}/huggingface~router/v1/c/1"
        )
        [received] = other.requests
        assert received.path == "/hf/v1/chat/completions"
        event = last_event()
        assert (event.service, event.path, event.via) == (
            "huggingface",
            "~router/v1/chat/completions",
            "mcp",
        )

    def test_call_api_takes_a_host_as_the_paths_first_segment(self, agent, index_host):
        arguments = {"service": "pinecone~host", "method": "POST", "path": f"/{INDEX_HOST}/query"}
        result = tool(agent["token"], "call_api", arguments)
        assert result["isError"] is False
        assert [r.path for r in index_host.requests] == ["/query"]

    def test_a_refusal_is_a_tool_error(self, agent, index_host):
        arguments = {"service": "pinecone~host", "method": "GET", "path": "/evil.example.com/x"}
        result = tool(agent["token"], "call_api", arguments)
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "invalid_proxy_path"
        assert index_host.requests == []
        assert last_event().path == "~host/evil.example.com/x"

    def test_list_services_says_the_bases_a_grant_covers(self, agent, alice_api):
        grants = ["huggingface", {"service": "pinecone", "base": "host"}, "github"]
        assert put_agent(alice_api, "bot", grants, access=None).status_code == 200
        result = tool(agent["token"], "list_services", {})
        entries = {e["service"]: e for e in result["structuredContent"]["services"]}
        assert entries["huggingface"]["bases"] == {"router": "https://router.huggingface.co"}
        assert "base" not in entries["huggingface"]
        assert entries["pinecone"]["bases"] == {"host": "*.svc.*.pinecone.io"}
        assert entries["pinecone"]["base"] == "host"
        assert "bases" not in entries["github"]


class TestHostPatternSyntax:
    @pytest.mark.parametrize(
        ("host", "matched"),
        [
            ("idx-abc1234.svc.us-east1-gcp.pinecone.io", True),
            ("IDX.svc.aped-4627-b74a.pinecone.io", True),
            ("a.b.svc.env.pinecone.io", False),
            ("svc.env.pinecone.io", False),
            ("idx.svc.env.pinecone.io.", False),
            ("idx_1.svc.env.pinecone.io", False),
            ("idx-.svc.env.pinecone.io", False),
            ("idx.svc.env.pinecone.io.evil.example", False),
            ("idx.svc..pinecone.io", False),
        ],
    )
    def test_each_star_is_exactly_one_label(self, host, matched):
        assert parse_host_pattern("*.svc.*.pinecone.io").matches(host) is matched

    @pytest.mark.parametrize(
        "pattern",
        ["*.io", "*", "pinecone.io", "idx-*.pinecone.io", "*.svc.*", "*.Pinecone.io", "*..a.io"],
    )
    def test_a_pattern_names_two_labels_after_its_last_star(self, pattern):
        with pytest.raises(ValueError, match="host pattern"):
            parse_host_pattern(pattern)

    def test_the_servers_pattern_may_carry_a_scheme_and_a_port(self):
        pattern = parse_host_pattern("http://*.svc.internal.example:8443", url_form=True)
        assert (pattern.scheme, pattern.port) == ("http", 8443)
        assert pattern.url("I.svc.internal.example") == "http://i.svc.internal.example:8443"
        for bad in ("ftp://*.a.b", "http://*.a.b/path", "http://u@*.a.b", "http://*.a.b:x"):
            with pytest.raises(ValueError, match="host pattern"):
                parse_host_pattern(bad, url_form=True)
        with pytest.raises(ValueError, match="host pattern"):
            parse_host_pattern("https://*.a.example")  # the catalog's: a pattern alone


ENTRY = """
[[providers]]
id = "multi"
name = "Multi"
category = "ai"
base_url = "https://api.multi.example"
sensitive_none = "none"
{extra}
[[providers.shapes]]
key_type = "api_key"
required = ["api_key"]
"""


class TestCatalogKeys:
    def test_bases_and_a_host_pattern_are_read(self):
        text = ENTRY.format(
            extra='host_pattern = "*.data.multi.example"\n'
            '[providers.bases]\nfiles = "https://files.multi.example/v2"'
        )
        provider = parse_catalog(text)["multi"]
        assert provider.bases == {"files": "https://files.multi.example/v2"}
        assert provider.host_pattern.pattern == "*.data.multi.example"
        assert provider.base_names == ("files", "host")

    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            ('[providers.bases]\nhost = "https://h.multi.example"', "not `host`"),
            ('[providers.bases]\nFiles = "https://h.multi.example"', "a name of `bases`"),
            ('[providers.bases]\nfiles = "http://h.multi.example"', "`bases.files`"),
            ('[providers.bases]\nfiles = "https://h.multi.example?x=1"', "`bases.files`"),
            ("bases = {}", "`bases` must be a table"),
            ('host_pattern = "*.example"', "`host_pattern`"),
            ('host_pattern = "https://*.data.multi.example"', "`host_pattern`"),
            ("host_pattern = 3", "`host_pattern`"),
        ],
    )
    def test_invalid_entries_are_refused(self, extra, message):
        with pytest.raises(CatalogError, match=message):
            parse_catalog(ENTRY.format(extra=extra))


class TestServerSettings:
    def test_a_base_url_may_name_a_base(self, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(
            {"huggingface~router": "http://127.0.0.1:9/r", "dropbox~content": "https://x.example"}
        )
        assert checks.check_provider_base_urls(None) == []

    @pytest.mark.parametrize(
        ("overrides", "message"),
        [
            ({"huggingface~nope": "https://x.example"}, "['huggingface~nope'] names a base"),
            ({"github~router": "https://x.example"}, "['github~router'] names a base"),
            ({"unknown~router": "https://x.example"}, "['unknown~router'] names a base"),
            ({"pinecone~host": "https://x.example"}, "a key is a provider id"),
            ({"huggingface~": "https://x.example"}, "a key is a provider id"),
        ],
    )
    def test_a_base_url_naming_an_unknown_base_is_a_check_error(self, settings, overrides, message):
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(overrides)
        [error] = checks.check_provider_base_urls(None)
        assert error.id == "credvault.E003"
        assert message in error.msg

    def test_a_host_pattern_replacement_is_checked(self, settings):
        settings.CREDVAULT_PROVIDER_HOST_PATTERNS = json.dumps(
            {"pinecone": "http://*.svc.*.pinecone.internal:8443"}
        )
        assert checks.check_provider_host_patterns(None) == []

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            ("[", "not valid JSON"),
            ('["*.a.b"]', "must be a JSON object"),
            ('{"github": "*.api.github.example"}', "no `host_pattern` to replace"),
            ('{"nope": "*.a.example"}', "no `host_pattern` to replace"),
            ('{"pinecone": "*.io"}', "two labels after the last"),
            ('{"pinecone": "http://*.a.example/x"}', "nothing more"),
        ],
    )
    def test_an_invalid_host_pattern_replacement_is_a_check_error(self, settings, raw, message):
        settings.CREDVAULT_PROVIDER_HOST_PATTERNS = raw
        [error] = checks.check_provider_host_patterns(None)
        assert error.id == "credvault.E024"
        assert message in error.msg


@pytest.mark.django_db
class TestCreateAgentCommand:
    def test_base_narrows_each_grant(self, alice):
        out = StringIO()
        call_command(
            "create_agent",
            "alice",
            "bot",
            "--service",
            "huggingface",
            "--base",
            "router",
            stdout=out,
        )
        assert "huggingface (proxy, all methods, /, base router)" in out.getvalue()
        assert list(Grant.objects.values_list("service", "base")) == [("huggingface", "router")]

    def test_a_base_the_service_does_not_have_is_refused(self, alice):
        with pytest.raises(CommandError, match="--base 'router' for github: The base named"):
            call_command("create_agent", "alice", "bot", "--service", "github", "--base", "router")
        assert not Grant.objects.exists()


def _bases_of_the_catalog() -> list:
    from providers.catalog import catalog

    return [
        pytest.param(provider, name, id=f"{provider.id}~{name}")
        for provider in sorted(catalog().values(), key=lambda p: p.id)
        for name in provider.bases
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(("provider", "name"), _bases_of_the_catalog())
def test_every_other_base_of_the_catalog_is_proxied_with_the_sets_placement(
    alice_api, provider_server, provider, name
):
    shape = next(shape for shape in provider.shapes if shape.check is not None)
    values = {key: marked(key) for key in sorted(shape.required)}
    assert alice_api.store(provider.id, creds(**values)).status_code == 201
    assert put_agent(alice_api, "bot", [provider.id], access=None).status_code == 201
    token = agent_token(alice_api, "bot")
    assert call(token, "GET", f"{provider.id}~{name}", "/probe").status_code == 200
    [received] = provider_server.requests
    assert received.path == "/probe"
    auth = shape.check.auth
    headers = {key.lower(): value for key, value in received.headers.items()}
    if auth.type == "header":
        assert headers[auth.header.lower()] == auth.prefix + values[auth.field]
    else:
        assert headers["authorization"] == f"Bearer {values[auth.field]}"
