"""The MCP server's protocol and tools through Django's test client (docs/mcp.md): each
revision's negotiation, the tools, call_api as the broker's own call (redaction, refusals as
tool errors, binary and cut answers, revocation, one audit event per call with via mcp), the
HTTP refusals and the JSON-RPC errors, and no stored value in any tool list or result."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.test import Client

from services.audit import canonical
from services.models import AuditEvent
from services.rates import parse_rate
from tests.support.helpers import agent_token, creds, marked, put_agent

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def post(token: str | None, message: Any, *, version: str | None = None, **headers: str):
    """One POST to /mcp; `version` sends MCP-Protocol-Version (and, for 2026-07-28, the
    routing headers and `_meta` of a request)."""
    sent = {"Accept": "application/json, text/event-stream", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if version is not None:
        sent["MCP-Protocol-Version"] = version
    if version == MODERN and isinstance(message, dict) and "method" in message:
        sent.setdefault("Mcp-Method", message["method"])
        params = message.setdefault("params", {})
        params.setdefault("_meta", dict(META))
        if message["method"] == "tools/call":
            sent.setdefault("Mcp-Name", params.get("name", ""))
    body = message if isinstance(message, (bytes, str)) else json.dumps(message)
    return Client(raise_request_exception=False).post(
        "/mcp", body, content_type="application/json", headers=sent
    )


def rpc(method: str, params: dict | None = None, id: int = 1) -> dict:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def tool(token: str, name: str, arguments: dict, *, version: str | None = "2025-11-25") -> dict:
    response = post(
        token, rpc("tools/call", {"name": name, "arguments": arguments}), version=version
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.fixture
def agent(alice_api, provider_server):
    """Alice's github set (a marked value), a proxy grant, the agent's token."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    return value, agent_token(alice_api, "bot")


class TestNegotiation:
    @pytest.mark.parametrize("asked", ["2025-06-18", "2025-11-25"])
    def test_initialize_answers_the_version_asked(self, agent, asked):
        response = post(
            agent[1],
            rpc(
                "initialize",
                {
                    "protocolVersion": asked,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            ),
        )
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert "Mcp-Session-Id" not in response
        result = response.json()["result"]
        assert result["protocolVersion"] == asked
        assert result["capabilities"] == {"tools": {"listChanged": False}}
        assert result["serverInfo"]["name"] == "credvault"

    @pytest.mark.parametrize("asked", ["2024-11-05", "2099-01-01", MODERN])
    def test_an_unknown_version_is_answered_with_a_served_one(self, agent, asked):
        response = post(agent[1], rpc("initialize", {"protocolVersion": asked, "capabilities": {}}))
        assert response.json()["result"]["protocolVersion"] == "2025-11-25"

    def test_2026_discover(self, agent):
        response = post(agent[1], rpc("server/discover"), version=MODERN)
        assert response.status_code == 200, response.content
        result = response.json()["result"]
        assert result["supportedVersions"] == [MODERN]
        assert result["resultType"] == "complete"
        assert result["cacheScope"] == "private"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "credvault"

    def test_2026_errors_have_their_statuses(self, agent):
        token = agent[1]
        unknown = post(token, rpc("resources/list"), version=MODERN)
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == -32601
        mismatch = post(token, rpc("tools/list"), version=MODERN, **{"Mcp-Method": "tools/call"})
        assert mismatch.status_code == 400
        assert mismatch.json()["error"]["code"] == -32020
        wrong_name = post(
            token, rpc("tools/call", {"name": "list_services"}), version=MODERN, **{"Mcp-Name": "x"}
        )
        assert wrong_name.json()["error"]["code"] == -32020
        later = {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        unsupported = post(
            token,
            rpc("tools/list", {"_meta": {**META, **later}}),
            version="2099-01-01",
            **{"Mcp-Method": "tools/list"},
        )
        assert unsupported.status_code == 400
        error = unsupported.json()["error"]
        assert error["code"] == -32022
        assert error["data"]["supported"] == [MODERN]
        no_meta = Client().post(
            "/mcp",
            json.dumps(rpc("tools/list")),
            content_type="application/json",
            headers={
                "Authorization": f"Bearer {token}",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/list",
            },
        )
        assert no_meta.status_code == 400
        assert no_meta.json()["error"]["code"] == -32602

    def test_a_notification_is_202(self, agent):
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert post(agent[1], note).status_code == 202
        assert post(agent[1], dict(note), version=MODERN).status_code == 202

    def test_an_older_header_is_400(self, agent):
        assert post(agent[1], rpc("tools/list"), version="2025-03-26").status_code == 400


class TestTools:
    def test_tools_list_describes_the_agents_own_services(self, agent, bob_api):
        assert bob_api.store("slack", creds(api_key=marked("slack"))).status_code == 201
        assert put_agent(bob_api, "other", ["slack"]).status_code == 201
        response = post(agent[1], rpc("tools/list"), version="2025-11-25")
        tools = response.json()["result"]["tools"]
        assert [t["name"] for t in tools] == ["list_services", "call_api"]
        assert "github (GitHub)" in tools[1]["description"]
        assert "slack" not in response.content.decode()
        assert "cacheScope" not in response.json()["result"]
        modern = post(agent[1], rpc("tools/list"), version=MODERN).json()["result"]
        assert modern["cacheScope"] == "private"
        assert modern["resultType"] == "complete"

    def test_list_services(self, agent, alice_api):
        assert (
            put_agent(
                alice_api,
                "bot",
                [{"service": "github", "methods": ["GET"]}, {"service": "custom-thing"}],
            ).status_code
            == 200
        )
        result = tool(agent[1], "list_services", {})
        assert result["isError"] is False
        services = {entry["service"]: entry for entry in result["structuredContent"]["services"]}
        github = services["github"]
        assert github["provider"] == "GitHub"
        assert github["docsUrl"].startswith("https://")
        assert (github["status"], github["callable"], github["reason"]) == ("connected", True, None)
        assert github["methods"] == ["GET"]
        assert github["keyType"] == "api_key"
        custom = services["custom-thing"]
        assert custom["provider"] is None
        assert custom["docsUrl"] is None
        assert (custom["status"], custom["callable"]) == ("not_connected", False)
        assert custom["reason"] == "service_not_connected"
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


class TestCallApi:
    def test_a_get_and_a_post(self, agent, provider_server):
        value, token = agent
        provider_server.answer(200, {"login": "octo"})
        result = tool(
            token,
            "call_api",
            {
                "service": "github",
                "method": "GET",
                "path": "/user",
                "query": {"a": "1", "b": ["2", "3"]},
            },
        )
        structured = result["structuredContent"]
        assert (structured["status"], structured["bodyEncoding"], structured["truncated"]) == (
            200,
            "text",
            False,
        )
        assert json.loads(structured["body"]) == {"login": "octo"}
        sent = provider_server.requests[-1]
        assert sent.path == "/user?a=1&b=2&b=3"
        assert value in sent.headers["Authorization"]
        provider_server.answer(201, {"id": 7})
        result = tool(
            token,
            "call_api",
            {
                "service": "github",
                "method": "POST",
                "path": "/repos/o/r/issues",
                "body": {"title": "t"},
            },
            version=MODERN,
        )
        assert result["structuredContent"]["status"] == 201
        assert result["resultType"] == "complete"
        sent = provider_server.requests[-1]
        assert (sent.method, json.loads(sent.body)) == ("POST", {"title": "t"})
        assert {name.lower(): v for name, v in sent.headers.items()}["content-type"] == (
            "application/json"
        )

    def test_an_echoed_secret_is_redacted(self, agent, provider_server):
        value, token = agent
        provider_server.answer(200, {"echo": value}, headers={"X-Echo": value})
        result = tool(token, "call_api", {"service": "github", "method": "GET", "path": "/echo"})
        assert value not in json.dumps(result)
        assert "[REDACTED]" in result["structuredContent"]["body"]

    def test_a_refusal_is_a_tool_error(self, agent, alice_api, provider_server):
        assert (
            put_agent(alice_api, "bot", [{"service": "github", "methods": ["GET"]}]).status_code
            == 200
        )
        result = tool(agent[1], "call_api", {"service": "github", "method": "DELETE", "path": "/x"})
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "not_granted"
        assert result["structuredContent"]["error"]["status"] == 403
        assert provider_server.requests == []
        bad = tool(agent[1], "call_api", {"service": "github", "method": "GET"})
        assert bad["isError"] is True
        assert bad["structuredContent"]["error"]["code"] == "invalid_arguments"
        events = AuditEvent.objects.filter(action="agent.proxy").order_by("seq")
        assert [(e.status, e.method, e.path, e.via) for e in events] == [
            (403, "DELETE", "/x", "mcp"),
            (400, "GET", "", "mcp"),
        ]

    def test_the_providers_addresses_move_onto_the_proxy(self, agent, provider_server, settings):
        settings.CREDVAULT_PUBLIC_URL = "https://vault.example"
        link = f'<{provider_server.url}/user/repos?page=2>; rel="next"'
        provider_server.answer(200, [], headers={"Content-Type": "application/json", "Link": link})
        result = tool(agent[1], "call_api", {"service": "github", "method": "GET", "path": "/r"})
        assert result["structuredContent"]["headers"]["link"] == (
            '<https://vault.example/api/v1/agent/proxy/github/user/repos?page=2>; rel="next"'
        )

    def test_a_binary_answer_is_base64(self, agent, provider_server):
        provider_server.answer(200, b"\x89PNG\xff\x00\x01", headers={"Content-Type": "image/png"})
        result = tool(agent[1], "call_api", {"service": "github", "method": "GET", "path": "/img"})
        structured = result["structuredContent"]
        assert structured["bodyEncoding"] == "base64"
        assert base64.b64decode(structured["body"]) == b"\x89PNG\xff\x00\x01"

    def test_a_long_answer_is_cut(self, agent, provider_server, settings):
        settings.CREDVAULT_MCP_MAX_RESULT = 1000
        provider_server.answer(200, b"x" * 5000, headers={"Content-Type": "text/plain"})
        whole = tool(agent[1], "call_api", {"service": "github", "method": "GET", "path": "/big"})
        assert whole["structuredContent"]["truncated"] is True
        assert len(whole["structuredContent"]["body"]) == 1000
        provider_server.answer(
            200, b"", headers={"Content-Type": "text/plain"}, generated_bytes=300_000
        )
        streamed = tool(
            agent[1], "call_api", {"service": "github", "method": "GET", "path": "/stream"}
        )
        assert streamed["structuredContent"]["truncated"] is True
        assert len(streamed["structuredContent"]["body"]) == 1000
        event = AuditEvent.objects.filter(path="/stream").get()
        assert (event.outcome, event.via) == ("cut", "mcp")

    def test_revocation_on_the_very_next_call(self, agent, alice_api, provider_server):
        token = agent[1]
        assert (
            tool(token, "call_api", {"service": "github", "method": "GET", "path": "/u"})["isError"]
            is False
        )
        assert put_agent(alice_api, "bot", []).status_code == 200
        result = tool(token, "call_api", {"service": "github", "method": "GET", "path": "/u"})
        assert result["structuredContent"]["error"]["code"] == "not_granted"
        prefix = token[:12]
        revoked = alice_api.raw("DELETE", f"/api/v1/agents/bot/tokens/{prefix}")
        assert revoked.status_code == 204
        assert post(token, rpc("tools/list")).status_code == 401

    def test_one_audit_event_per_call_with_via_mcp(self, agent, provider_server, alice_api):
        before = AuditEvent.objects.count()
        tool(agent[1], "call_api", {"service": "github", "method": "GET", "path": "/a"})
        tool(agent[1], "call_api", {"service": "github", "method": "GET", "path": "/../x"})
        events = list(AuditEvent.objects.order_by("seq")[before:])
        assert [(e.action, e.path, e.via) for e in events] == [
            ("agent.proxy", "/a", "mcp"),
            ("agent.proxy", "/../x", "mcp"),
        ]
        assert events[0].upstream_status == 200
        assert events[1].status == 400
        assert '"via":"mcp"' in canonical(events[0])
        listed = alice_api.raw("GET", "/api/v1/audit-events?limit=5").json()["events"]
        assert [(e["path"], e["via"]) for e in listed[:2]] == [("/../x", "mcp"), ("/a", "mcp")]

    def test_an_event_without_via_keeps_its_canonical_form(self, agent):
        event = AuditEvent.objects.filter(via="").first()
        assert "via" not in canonical(event)


class TestHttpRefusals:
    def test_no_token_or_a_bad_one_is_401_naming_the_metadata(self, db, settings):
        settings.CREDVAULT_PUBLIC_URL = "http://127.0.0.1:8000"
        metadata = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
        for token in (None, "cva_bad"):
            response = post(token, rpc("tools/list"))
            assert response.status_code == 401
            assert response["WWW-Authenticate"].startswith(
                f'Bearer realm="credvault", resource_metadata="{metadata}"'
            )
        document = Client().get("/.well-known/oauth-protected-resource/mcp").json()
        assert document["resource"] == "http://127.0.0.1:8000/mcp"

    def test_an_account_token_is_403(self, alice_account_and_token):
        _, token = alice_account_and_token
        response = post(token, rpc("tools/list"))
        assert response.status_code == 403
        assert response.json()["code"] == "insufficient_scope"

    def test_get_is_405(self, agent):
        response = Client().get("/mcp", headers={"Authorization": f"Bearer {agent[1]}"})
        assert response.status_code == 405
        assert response["Allow"] == "POST"

    def test_a_body_over_1_mib_is_413(self, agent):
        response = post(agent[1], b" " * (1024 * 1024 + 1))
        assert response.status_code == 413

    def test_a_bad_origin_is_403(self, agent, settings):
        settings.CREDVAULT_PUBLIC_URL = "http://127.0.0.1:8000"
        assert post(agent[1], rpc("tools/list"), Origin="http://evil.example").status_code == 403
        assert post(agent[1], rpc("tools/list"), Origin="http://127.0.0.1:8000").status_code == 200

    def test_the_proxy_rate_counts_mcp_requests_with_the_proxys(self, agent, settings):
        settings.CREDVAULT_PROXY_RATE_LIMIT = parse_rate("3/min")
        token = agent[1]
        proxied = Client().get(
            "/api/v1/agent/proxy/github/user", headers={"Authorization": f"Bearer {token}"}
        )
        assert proxied.status_code == 200
        statuses = [post(token, rpc("tools/list")).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]

    @pytest.mark.parametrize(
        ("body", "code"),
        [
            (b"{not json", -32700),
            (b"[]", -32600),
            (json.dumps({"jsonrpc": "1.0", "id": 1, "method": "x"}), -32600),
            (json.dumps(rpc("nope")), -32601),
            (json.dumps(rpc("tools/call", {"name": "no_such_tool"})), -32602),
            (json.dumps(rpc("tools/call", {"name": "call_api", "arguments": []})), -32602),
        ],
    )
    def test_json_rpc_errors(self, agent, body, code):
        response = post(agent[1], body)
        assert response.json()["error"]["code"] == code
        assert response.status_code == (400 if code in (-32700, -32600) else 200)


def test_no_tool_list_or_result_holds_a_stored_value(alice_api, provider_server):
    """An agent with a read grant too: the tools never hand out the plaintext."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access="read").status_code == 201
    token = agent_token(alice_api, "bot")
    provider_server.answer(200, {"echo": value, "b64": base64.b64encode(value.encode()).decode()})
    seen = []
    for version in ("2025-06-18", "2025-11-25", MODERN):
        seen.append(post(token, rpc("tools/list"), version=version).content)
        for name, arguments in (
            ("list_services", {}),
            ("call_api", {"service": "github", "method": "GET", "path": "/echo"}),
            ("call_api", {"service": "github", "method": "GET", "path": "/user/keys"}),
        ):
            seen.append(
                post(
                    token,
                    rpc("tools/call", {"name": name, "arguments": arguments}),
                    version=version,
                ).content
            )
    for content in seen:
        assert value.encode() not in content
        assert base64.b64encode(value.encode()) not in content


@pytest.mark.django_db
def test_call_api_passes_an_identifier_on_and_redacts_the_secret_beside_it(
    alice_api, provider_server
):
    """Twilio's Account SID, an identifier, comes back in a tool's result as the provider
    wrote it (its `next_page_uri` still names the account); its auth token does not."""
    sid, secret = "AC" + "1" * 32, marked("twilio")
    stored = creds(account_sid=sid, auth_token=secret)
    assert alice_api.store("twilio", stored).status_code == 201
    assert put_agent(alice_api, "bot", ["twilio"], access=None).status_code == 201
    token = agent_token(alice_api, "bot")
    listing = f"/2010-04-01/Accounts/{sid}/Messages.json"
    answer = {"account_sid": sid, "body": secret, "next_page_uri": f"{listing}?Page=1"}
    provider_server.answer(200, answer, headers={"X-Account": sid, "X-Echo": secret})
    result = tool(token, "call_api", {"service": "twilio", "method": "GET", "path": listing})
    content = result["structuredContent"]
    assert content["status"] == 200
    assert json.loads(content["body"]) == {**answer, "body": "[REDACTED]"}
    assert (content["headers"]["x-account"], content["headers"]["x-echo"]) == (sid, "[REDACTED]")
    assert secret not in json.dumps(result)
    assert [request.path for request in provider_server.requests] == [listing]
