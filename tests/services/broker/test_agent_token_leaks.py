"""credvault's tokens never leave: the agent token is read from where a provider's SDK puts its
key, the credential's path segment included (Telegram's `/bot<token>/`), and replaced by the
credential; a request that carries a `cva_` or `cvt_` token anywhere else (another header, the
query string, another path segment, the body; through MCP's call_api any argument) is 400
`agent_token_in_request`, and nothing is sent. Each against a real provider stand-in on
127.0.0.1, asserting what reached it."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from services.models import AuditEvent
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent

PREFIX = "/api/v1/agent/proxy"


@pytest.fixture
def github(alice_api, provider_server):
    """Alice's GitHub key (a marked value), her agent `bot` granted it; the agent's token."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    return agent_token(alice_api, "bot")


@pytest.fixture
def telegram(alice_api, provider_server):
    """Alice's Telegram bot token (a marked value), her agent `bot` granted it; the value and the
    agent's token."""
    value = marked("tg")
    assert alice_api.store("telegram", creds(bot_token=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["telegram"], access=None).status_code == 201
    return value, agent_token(alice_api, "bot")


def call_api(token: str, arguments: dict) -> dict:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "call_api", "arguments": arguments},
    }
    response = Client(raise_request_exception=False).post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"},
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


def refused_event() -> AuditEvent:
    event = AuditEvent.objects.get(action="agent.proxy")
    assert event.status == 400
    return event


@pytest.mark.django_db
class TestTheTokenInTheCredentialsSegment:
    def test_an_sdk_puts_the_agent_token_where_the_bot_token_goes(
        self, telegram, provider_server, caplog
    ):
        """`Bot(token="cva_...", base_url=".../proxy/telegram/bot")`: no Authorization at all."""
        value, token = telegram
        provider_server.answer(200, {"ok": True, "result": {"id": 1}})
        with caplog.at_level(logging.INFO):
            response = Client(raise_request_exception=False).get(
                f"{PREFIX}/telegram/bot{token}/getMe"
            )
        assert response.status_code == 200, response.content
        assert json.loads(response.content) == {"ok": True, "result": {"id": 1}}
        [sent] = provider_server.requests
        assert sent.path == f"/bot{value}/getMe"
        assert token not in json.dumps(sent.headers)
        event = AuditEvent.objects.get(action="agent.proxy")
        assert (event.status, event.path, event.upstream_status) == (200, "/getMe", 200)
        assert token not in caplog.text
        assert "/api/v1/agent/proxy/telegram/botcva_.../getMe" in caplog.text

    def test_the_token_in_authorization_still_works(self, telegram, provider_server):
        value, token = telegram
        response = call(token, "GET", "telegram", "/getMe")
        assert response.status_code == 200
        assert [sent.path for sent in provider_server.requests] == [f"/bot{value}/getMe"]

    def test_the_segment_and_authorization_may_carry_the_same_token(
        self, telegram, provider_server
    ):
        value, token = telegram
        response = call(token, "POST", "telegram", f"/bot{token}/sendMessage", body=b'{"a":1}')
        assert response.status_code == 200
        [sent] = provider_server.requests
        assert (sent.method, sent.path, sent.body) == (
            "POST",
            f"/bot{value}/sendMessage",
            b'{"a":1}',
        )

    def test_two_different_tokens_are_ambiguous(self, telegram, alice_api, provider_server):
        _, token = telegram
        other = agent_token(alice_api, "bot")
        response = call(token, "GET", "telegram", f"/bot{other}/getMe")
        assert_problem(response, 400, "ambiguous_credentials")
        assert provider_server.requests == []

    def test_a_refused_token_in_the_segment_is_401_and_unlogged(
        self, telegram, provider_server, caplog
    ):
        _, token = telegram
        wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
        with caplog.at_level(logging.INFO):
            response = Client(raise_request_exception=False).get(
                f"{PREFIX}/telegram/bot{wrong}/getMe"
            )
        assert_problem(response, 401, "invalid_token")
        assert provider_server.requests == []
        assert wrong not in caplog.text

    def test_another_segment_is_the_providers_path(self, telegram, provider_server):
        """Only a value that begins as credvault's tokens do is read from the segment."""
        value, token = telegram
        response = call(token, "GET", "telegram", "/botfather/getMe")
        assert response.status_code == 200
        [sent] = provider_server.requests
        assert sent.path == f"/bot{value}/botfather/getMe"

    def test_the_token_in_a_later_segment_is_refused(self, telegram, provider_server):
        _, token = telegram
        response = call(token, "GET", "telegram", f"/getMe/bot{token}")
        assert_problem(response, 400, "agent_token_in_request")
        assert provider_server.requests == []


@pytest.mark.django_db
class TestATokenElsewhere:
    def test_in_another_header(self, github, provider_server):
        response = call(github, "GET", "github", "/user", headers={"X-Api-Key": github})
        body = assert_problem(response, 400, "agent_token_in_request")
        assert github not in json.dumps(body)
        assert response["X-Credvault-Error"] == "agent_token_in_request"
        assert provider_server.requests == []
        assert (refused_event().path, refused_event().service) == ("/user", "github")

    @pytest.mark.parametrize(
        "query", ["key={t}", "a=1&api_key=Bearer%20{t}", "k=cva%5F{rest}", "k=cva%255F{rest}"]
    )
    def test_in_the_query(self, github, provider_server, query):
        response = call(
            github, "GET", "github", "/user", query=query.format(t=github, rest=github[4:])
        )
        assert_problem(response, 400, "agent_token_in_request")
        assert provider_server.requests == []

    @pytest.mark.parametrize("path", ["/repos/{t}", "/repos/x{t}y/issues", "/a/cva%5F{rest}"])
    def test_in_a_path_segment(self, github, provider_server, path):
        response = call(github, "GET", "github", path.format(t=github, rest=github[4:]))
        assert_problem(response, 400, "agent_token_in_request")
        assert provider_server.requests == []
        recorded = refused_event().path
        assert recorded.startswith("/")
        assert "..." in recorded
        assert github[4:] not in recorded

    @pytest.mark.parametrize(
        ("content_type", "body"),
        [
            ("application/json", '{"api_key": "{t}"}'),
            ("application/x-www-form-urlencoded", "token=cva%5F{rest}&x=1"),
        ],
    )
    def test_in_the_body(self, github, provider_server, content_type, body):
        sent = body.replace("{t}", github).replace("{rest}", github[4:]).encode()
        response = call(github, "POST", "github", "/x", body=sent, content_type=content_type)
        assert_problem(response, 400, "agent_token_in_request")
        assert provider_server.requests == []

    def test_an_account_token_anywhere(self, github, alice_account_and_token, provider_server):
        account_token = alice_account_and_token[1]
        response = call(github, "GET", "github", "/user", headers={"X-Other": account_token})
        assert_problem(response, 400, "agent_token_in_request")
        assert provider_server.requests == []

    def test_text_like_a_token_without_its_checksum_goes_on(self, github, provider_server):
        """Only a well-formed token is one: an example in a body or query is not refused."""
        fake = "cva_" + "A" * 46
        response = call(github, "POST", "github", "/x", query=f"q={fake}", body=fake.encode())
        assert response.status_code == 200
        [sent] = provider_server.requests
        assert sent.path == f"/x?q={fake}"
        assert sent.body == fake.encode()


@pytest.mark.django_db
class TestCallApi:
    @pytest.mark.parametrize(
        "where",
        [
            {"headers": {"X-Api-Key": "{t}"}},
            {"headers": {"Authorization": "Bearer {t}"}},
            {"query": {"key": "{t}"}},
            {"path": "/user?key={t}"},
            {"path": "/repos/{t}"},
            {"path": "/bot{t}/getMe"},
            {"body": {"nested": ["{t}"]}},
        ],
    )
    def test_a_token_in_any_argument_is_a_tool_error(self, github, provider_server, where):
        arguments = json.loads(
            json.dumps({"service": "github", "method": "POST", "path": "/user", **where}).replace(
                "{t}", github
            )
        )
        result = call_api(github, arguments)
        assert result["isError"] is True
        error = result["structuredContent"]["error"]
        assert (error["status"], error["code"]) == (400, "agent_token_in_request")
        assert github not in json.dumps(result)
        assert provider_server.requests == []
        event = refused_event()
        assert event.via == "mcp"
        assert github[4:] not in event.path
