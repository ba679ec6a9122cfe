"""One rule set for the request headers of every route, the proxy's and MCP's `call_api`: names
are RFC 9110 tokens, values hold no control character and no line folding, and the names the
proxy drops or checks (method overrides, `Host`, `Transfer-Encoding`, hop-by-hop, forwarding
headers, the credential's own header) are matched in any case and with `_` read as `-`.
Anything else is 400 `invalid_proxy_request`, a tool error through MCP, and nothing is sent.
A lone surrogate in MCP arguments is `invalid_arguments`, never a 500. Each against a real
provider stand-in on 127.0.0.1, asserting what reached it."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from services.models import AuditEvent
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent

GET_ONLY = [{"service": "github", "methods": ["GET"]}]


@pytest.fixture
def github(alice_api, provider_server):
    """Alice's GitHub key (a marked value), her agent `bot` granted GET only; the value and the
    agent's token."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", GET_ONLY).status_code == 201
    return value, agent_token(alice_api, "bot")


def call_api(token: str, arguments: dict | str) -> dict:
    """call_api through POST /mcp (the handshake era's 2025-11-25): the tool's result."""
    body = arguments if isinstance(arguments, str) else json.dumps(arguments)
    message = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"call_api","arguments":{body}}}}}'
    )
    response = Client(raise_request_exception=False).post(
        "/mcp",
        message,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"},
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


def tool_error(result: dict) -> tuple[int, str]:
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    return error["status"], error["code"]


def sent_names(provider_server) -> set[str]:
    [sent] = provider_server.requests
    return {name.lower() for name in sent.headers}


@pytest.mark.django_db
class TestCallApiHeaders:
    @pytest.mark.parametrize(
        "name", ["X_HTTP_Method_Override", "x_http_method", "X-Method_Override", "X-HTTP-METHOD"]
    )
    def test_an_override_spelled_with_underscores_is_checked_against_the_grant(
        self, github, provider_server, name
    ):
        result = call_api(
            github[1],
            {
                "service": "github",
                "method": "GET",
                "path": "/repos/o/r",
                "headers": {name: "DELETE"},
            },
        )
        assert tool_error(result) == (403, "not_granted")
        assert "method" in result["structuredContent"]["error"]["detail"]
        assert provider_server.requests == []
        event = AuditEvent.objects.get(action="agent.proxy")
        assert (event.status, event.via) == (403, "mcp")

    @pytest.mark.parametrize(
        "name",
        [
            "Host",
            "HOST",
            "Transfer_Encoding",
            "keep_alive",
            "Proxy_Connection",
            "X_Forwarded_For",
            "x_forwarded_host",
            "Forwarded",
            "Via",
            "X_Real_IP",
            "Content_Length",
            "Authorization",
            "Cookie",
        ],
    )
    def test_dropped_names_are_dropped_in_any_spelling(self, github, provider_server, name):
        provider_server.answer(200, {"ok": True})
        result = call_api(
            github[1],
            {"service": "github", "method": "GET", "path": "/u", "headers": {name: "evil.example"}},
        )
        assert result["isError"] is False, result
        assert result["structuredContent"]["status"] == 200
        [sent] = provider_server.requests
        assert "evil.example" not in json.dumps(sent.headers)
        assert sent.headers["Authorization"] == f"Bearer {github[0]}"

    def test_a_header_named_by_connection_is_dropped_in_any_spelling(self, github, provider_server):
        result = call_api(
            github[1],
            {
                "service": "github",
                "method": "GET",
                "path": "/u",
                "headers": {"Connection": "X-Secret-Hop", "X_Secret_Hop": "hop", "X-Keep": "1"},
            },
        )
        assert result["isError"] is False
        names = sent_names(provider_server)
        assert "x_secret_hop" not in names
        assert "x-secret-hop" not in names
        assert "x-keep" in names

    def test_the_credentials_own_header_is_dropped_in_any_spelling(
        self, alice_api, provider_server
    ):
        """Anthropic's key goes in `x-api-key`: an agent's `X_Api_Key` never reaches it."""
        value = marked("anthropic")
        assert alice_api.store("anthropic", creds(api_key=value)).status_code == 201
        assert put_agent(alice_api, "bot", ["anthropic"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        result = call_api(
            token,
            {
                "service": "anthropic",
                "method": "GET",
                "path": "/v1/models",
                "headers": {"X_Api_Key": "the-agents-own"},
            },
        )
        assert result["isError"] is False
        [sent] = provider_server.requests
        assert "the-agents-own" not in json.dumps(sent.headers)
        assert {n.lower(): v for n, v in sent.headers.items()}["x-api-key"] == value

    @pytest.mark.parametrize(
        "headers",
        [
            {"X-Bad Name": "1"},
            {"X-Bad:Name": "1"},
            {"": "1"},
            {"X-Ok": "a\r\nX-Injected: 1"},
            {"X-Ok": "a\n b"},
            {"X-Ok": "a\r\n\tfolded"},
            {"X-Ok": "nul\x00"},
            {"X-Ok": "tab\there"},
            {"X-Ok": "del\x7f"},
            {"X-Ok": "snow \u2603"},
            {"X-\u00e9": "1"},
        ],
    )
    def test_a_header_that_is_no_header_is_a_tool_error(self, github, provider_server, headers):
        result = call_api(
            github[1], {"service": "github", "method": "GET", "path": "/u", "headers": headers}
        )
        assert tool_error(result) == (400, "invalid_proxy_request")
        assert provider_server.requests == []
        event = AuditEvent.objects.get(action="agent.proxy")
        assert (event.status, event.path, event.via) == (400, "/u", "mcp")

    @pytest.mark.parametrize(
        "arguments",
        [
            r'{"service":"github","method":"GET","path":"/u\ud800"}',
            r'{"service":"github","method":"GET","path":"/u","body":"\udfff"}',
            r'{"service":"github","method":"GET","path":"/u","headers":{"X-A":"\ud800"}}',
            r'{"service":"github","method":"GET","path":"/u","query":{"\ud83d":"1"}}',
            r'{"service":"\ud800","method":"GET","path":"/u"}',
        ],
    )
    def test_a_lone_surrogate_in_the_arguments_is_invalid_arguments(
        self, github, provider_server, arguments
    ):
        result = call_api(github[1], arguments)
        assert tool_error(result) == (400, "invalid_arguments")
        assert "surrogate" in result["structuredContent"]["error"]["detail"]
        assert provider_server.requests == []
        event = AuditEvent.objects.get(action="agent.proxy")
        assert (event.status, event.via) == (400, "mcp")
        assert event.path in ("", "/u")

    def test_a_surrogate_pair_is_text(self, github, provider_server):
        result = call_api(
            github[1],
            r'{"service":"github","method":"GET","path":"/u","query":{"q":"\ud83d\ude00"}}',
        )
        assert result["isError"] is False
        [sent] = provider_server.requests
        assert sent.path == "/u?q=%F0%9F%98%80"


@pytest.mark.django_db
class TestProxyHeaders:
    @pytest.mark.parametrize(
        "headers",
        [
            {"X-Ok": "a\r\nX-Injected: 1"},
            {"X-Ok": "a\n b"},
            {"X-Ok": "nul\x00"},
            {"X-Ok": "tab\there"},
        ],
    )
    def test_a_value_with_a_control_character_is_refused(self, github, provider_server, headers):
        response = call(github[1], "GET", "github", "/u", headers=headers)
        body = assert_problem(response, 400, "invalid_proxy_request")
        assert "X-Ok" in body["detail"] or "x-ok" in body["detail"]
        assert response["X-Credvault-Error"] == "invalid_proxy_request"
        assert provider_server.requests == []

    def test_an_override_is_checked_and_dropped_as_call_api_does(self, github, provider_server):
        response = call(github[1], "GET", "github", "/u", headers={"X-HTTP-Method": "DELETE"})
        assert_problem(response, 403, "not_granted")
        assert provider_server.requests == []

    def test_plain_headers_go_on(self, github, provider_server):
        provider_server.answer(200, {"ok": True})
        response = call(
            github[1], "GET", "github", "/u", headers={"X-Trace": "a b;c=\u00e9", "Accept": "*/*"}
        )
        assert response.status_code == 200
        [sent] = provider_server.requests
        assert {name.lower(): v for name, v in sent.headers.items()}["x-trace"] == "a b;c=\u00e9"
