"""Grants that expire and grants that ask: `expiresAt` and `approve` through the account API
(round trip, the shape of a grant without them unchanged, a 400 naming each bad field), the
refusal of an expired grant on every path an agent takes (proxy, read, MCP), and a sensitive
endpoint that an `approve` rule names, open to approved calls only."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from services.consent.decisions import Decider, approve_call
from services.models import AuditEvent, AuditOutcome, Grant
from services.times import rfc3339
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent, read


def mcp(token: str, method: str, params: dict) -> dict:
    """One MCP request (2025-11-25) with the agent's token: its result."""
    response = Client().post(
        "/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


def tool(token: str, name: str, arguments: dict) -> dict:
    return mcp(token, "tools/call", {"name": name, "arguments": arguments})


DEFAULT_SHAPE = {"service", "access", "methods", "paths", "graphql"}


def later(**delta: float) -> str:
    return rfc3339(timezone.now() + timedelta(**delta))


def listed(api) -> list[dict]:
    response = api.client.get("/api/v1/agents", headers=api.headers())
    assert response.status_code == 200
    return response.json()


def expire_grant(service: str = "github") -> None:
    """The grant of `service`, past its expiry (a client can only give one in the future)."""
    Grant.objects.filter(service=service).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
class TestRoundTrip:
    def test_expiry_and_rules_come_back_as_given(self, alice_api):
        expires = later(days=2)
        grant = {
            "service": "github",
            "expiresAt": expires,
            "approve": [{"methods": ["POST", "DELETE"], "paths": ["/repos"]}, {}],
        }
        response = put_agent(alice_api, "bot", [grant], access=None)
        assert response.status_code == 201, response.content
        shown = response.json()["services"][0]
        assert set(shown) == DEFAULT_SHAPE | {"expiresAt", "approve"}
        assert shown["expiresAt"] == expires
        assert shown["approve"] == [{"methods": ["POST", "DELETE"], "paths": ["/repos"]}, {}]
        assert listed(alice_api)[0]["services"] == [shown]
        stored = Grant.objects.get()
        assert rfc3339(stored.expires_at) == expires
        assert stored.approve == [{"methods": ["POST", "DELETE"], "paths": ["/repos"]}, {}]

    def test_each_is_kept_in_its_one_form(self, alice_api):
        grant = {
            "service": "github",
            "expiresAt": "2999-01-01T10:00:00.5+02:00",
            "approve": [
                {"methods": ["DELETE", "POST", "DELETE"], "paths": ["/z", "/a", "/z"]},
                {"paths": ["/user/keys"]},
                {"methods": ["POST", "DELETE"], "paths": ["/a", "/z"]},
            ],
        }
        shown = put_agent(alice_api, "bot", [grant], access=None).json()["services"][0]
        assert shown["expiresAt"] == "2999-01-01T08:00:00.500000Z"
        # Methods in the order of PROXY_METHODS, paths sorted, each once; a rule given twice
        # counts once, and the rules keep their order (a call goes under the first it matches).
        assert shown["approve"] == [
            {"methods": ["POST", "DELETE"], "paths": ["/a", "/z"]},
            {"paths": ["/user/keys"]},
        ]

    def test_a_grant_without_them_keeps_its_shape(self, alice_api):
        plain = {"service": "slack", "methods": ["GET"]}
        asking = {"service": "github", "approve": [{}], "expiresAt": later(hours=1)}
        shown = put_agent(alice_api, "bot", [plain, asking], access=None).json()["services"]
        assert set(shown[1]) == DEFAULT_SHAPE
        assert shown[1] == {
            "service": "slack",
            "access": "proxy",
            "methods": ["GET"],
            "paths": ["/"],
            "graphql": [],
        }
        assert set(shown[0]) - set(shown[1]) == {"expiresAt", "approve"}

    def test_a_put_without_them_clears_them(self, alice_api):
        asking = {"service": "github", "approve": [{}], "expiresAt": later(hours=1)}
        assert put_agent(alice_api, "bot", [asking], access=None).status_code == 201
        again = put_agent(alice_api, "bot", ["github"], access=None)
        assert again.status_code == 200
        assert set(again.json()["services"][0]) == DEFAULT_SHAPE
        assert Grant.objects.get().expires_at is None
        assert Grant.objects.get().approve == []


def past() -> str:
    return later(minutes=-1)


@pytest.mark.django_db
class TestBadInput:
    @pytest.mark.parametrize(
        ("options", "field", "code"),
        [
            ({"expiresAt": "past"}, "services[0].expiresAt", "invalid"),
            ({"expiresAt": "2030-01-01"}, "services[0].expiresAt", "invalid"),
            ({"expiresAt": "2030-01-01T00:00:00"}, "services[0].expiresAt", "invalid"),
            ({"expiresAt": "2030-01-01 00:00:00Z"}, "services[0].expiresAt", "invalid"),
            ({"expiresAt": "2030-02-30T00:00:00Z"}, "services[0].expiresAt", "invalid"),
            ({"expiresAt": 1893456000}, "services[0].expiresAt", "invalid"),
            ({"approve": {}}, "services[0].approve", "invalid_type"),
            ({"approve": [{}] * 11}, "services[0].approve", "invalid_length"),
            ({"approve": ["POST"]}, "services[0].approve[0]", "invalid_type"),
            (
                {"approve": [{"methods": ["FETCH"]}]},
                "services[0].approve[0].methods[0]",
                "invalid",
            ),
            (
                {"methods": ["GET"], "approve": [{"methods": ["POST"]}]},
                "services[0].approve[0].methods[0]",
                "invalid",
            ),
            ({"approve": [{"methods": []}]}, "services[0].approve[0].methods", "invalid_length"),
            (
                {"approve": [{"paths": ["/ok", "repos"]}]},
                "services[0].approve[0].paths[1]",
                "invalid",
            ),
            (
                {"approve": [{"paths": ["/a/../b"]}]},
                "services[0].approve[0].paths[0]",
                "invalid",
            ),
            (
                {"approve": [{"paths": [f"/{n}" for n in range(21)]}]},
                "services[0].approve[0].paths",
                "invalid_length",
            ),
            (
                {"approve": [{"method": ["POST"]}]},
                "services[0].approve[0].method",
                "unknown_member",
            ),
        ],
    )
    def test_each_is_a_400_naming_its_field(self, alice_api, options, field, code):
        if options.get("expiresAt") == "past":
            options = {**options, "expiresAt": past()}
        response = put_agent(alice_api, "bot", [{"service": "github", **options}], access=None)
        problem = assert_problem(response, 400, "invalid_request")
        assert [(error["field"], error["code"]) for error in problem["errors"]] == [(field, code)]
        assert not Grant.objects.exists()

    def test_a_past_expiry_says_it_must_be_in_the_future(self, alice_api):
        response = put_agent(
            alice_api, "bot", [{"service": "github", "expiresAt": past()}], access=None
        )
        [error] = assert_problem(response, 400, "invalid_request")["errors"]
        assert "in the future" in error["message"]

    def test_a_method_the_grant_refuses_is_named(self, alice_api):
        grant = {"service": "github", "methods": ["GET", "POST"], "approve": [{"methods": ["PUT"]}]}
        response = put_agent(alice_api, "bot", [grant], access=None)
        [error] = assert_problem(response, 400, "invalid_request")["errors"]
        assert error["message"] == (
            "One of the grant's own methods (GET, POST): the grant refuses any other."
        )


@pytest.fixture
def github_set(alice_api, provider_server):
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201


@pytest.mark.django_db
class TestExpiry:
    def test_the_proxy_refuses_an_expired_grant_and_sends_nothing(
        self, alice_api, github_set, provider_server
    ):
        grant = {"service": "github", "expiresAt": later(hours=1)}
        assert put_agent(alice_api, "bot", [grant], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        provider_server.answer(200, {"ok": True})
        assert call(token, "GET", "github", "/user").status_code == 200
        expire_grant()
        problem = assert_problem(call(token, "GET", "github", "/user"), 403, "not_granted")
        assert "expired at " in problem["detail"]
        assert len(provider_server.requests) == 1
        refused = AuditEvent.objects.filter(outcome=AuditOutcome.REFUSED).get()
        assert (refused.action, refused.status) == ("agent.proxy", 403)

    def test_the_read_refuses_an_expired_grant(self, alice_api, github_set):
        grant = {"service": "github", "access": "read", "expiresAt": later(hours=1)}
        assert put_agent(alice_api, "bot", [grant], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        assert read(token, "github").status_code == 200
        expire_grant()
        problem = assert_problem(read(token, "github"), 403, "not_granted")
        assert "expired at " in problem["detail"]
        assert "gh" not in json.dumps(problem)

    def test_a_grant_without_an_expiry_is_refused_for_being_absent(self, alice_api, github_set):
        assert put_agent(alice_api, "bot", ["slack"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        problem = assert_problem(call(token, "GET", "github", "/user"), 403, "not_granted")
        assert "expired" not in problem["detail"]

    def test_mcp_refuses_and_lists_an_expired_grant_as_not_callable(
        self, alice_api, github_set, provider_server
    ):
        expires = later(hours=1)
        grant = {"service": "github", "expiresAt": expires, "approve": [{"paths": ["/orgs"]}]}
        assert put_agent(alice_api, "bot", [grant, "slack"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        provider_server.answer(200, {"ok": True})
        arguments = {"service": "github", "method": "GET", "path": "/user"}
        assert tool(token, "call_api", arguments)["isError"] is False
        entry = tool(token, "list_services", {})["structuredContent"]["services"][0]
        assert (entry["callable"], entry["expiresAt"]) == (True, expires)
        assert entry["approve"] == [{"paths": ["/orgs"]}]
        slack = tool(token, "list_services", {})["structuredContent"]["services"][1]
        assert "expiresAt" not in slack
        assert "approve" not in slack

        expire_grant()
        refused = tool(token, "call_api", arguments)
        assert refused["isError"] is True
        assert refused["structuredContent"]["error"]["code"] == "not_granted"
        assert "expired at " in refused["structuredContent"]["error"]["detail"]
        entry = tool(token, "list_services", {})["structuredContent"]["services"][0]
        assert (entry["callable"], entry["reason"]) == (False, "not_granted")
        description = mcp(token, "tools/list", {})["tools"][0]["description"]
        assert "slack" in description
        assert "github" not in description
        assert len(provider_server.requests) == 1


@pytest.mark.django_db
class TestSensitiveEndpointUnderApprove:
    def test_named_under_approve_it_asks_and_an_approval_opens_it(
        self, alice_api, alice, github_set, provider_server
    ):
        grant = {"service": "github", "approve": [{"methods": ["POST"], "paths": ["/user/keys"]}]}
        assert put_agent(alice_api, "asker", [grant], access=None).status_code == 201
        assert put_agent(alice_api, "plain", ["github"], access=None).status_code == 201
        asker, plain = agent_token(alice_api, "asker"), agent_token(alice_api, "plain")

        assert_problem(call(plain, "POST", "github", "/user/keys"), 403, "sensitive_endpoint")
        asked = assert_problem(
            call(asker, "POST", "github", "/user/keys"), 403, "approval_required"
        )
        assert provider_server.requests == []
        decider = Decider(account_id=alice.pk, request_id="test", member="person@example.com")
        approve_call(decider=decider, approval_id=asked["approvalId"])
        provider_server.answer(201, {"id": 1})
        assert call(asker, "POST", "github", "/user/keys").status_code == 201
        assert [sent.path for sent in provider_server.requests] == ["/user/keys"]
        # Another sensitive endpoint, which no rule names, stays refused.
        assert_problem(call(asker, "POST", "github", "/orgs/o/hooks"), 403, "sensitive_endpoint")
