"""An agent asks for access (POST /api/v1/agent/access-requests), reads its own request, and a
member or the account token approves it as asked or narrower (wider is 400), or denies it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from services.consent.access import approve_access
from services.consent.decisions import Decider
from services.exceptions import InvalidRequest
from services.grants import GrantSpec, given_in_list
from services.models import Approval, AuditEvent, Grant
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent

REQUESTS = "/api/v1/agent/access-requests"
ASKED = {
    "service": "github",
    "methods": ["GET", "POST"],
    "paths": ["/repos/acme"],
}


def ask(token: str, body: object):
    return Client(raise_request_exception=False).post(
        REQUESTS,
        json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def read(token: str, approval_id: str):
    return Client(raise_request_exception=False).get(
        f"{REQUESTS}/{approval_id}", headers={"Authorization": f"Bearer {token}"}
    )


def asked_id(token: str, services: list | None = None, **more: object) -> str:
    made = ask(token, {"services": services or [ASKED], "reason": "Triage issues.", **more})
    assert made.status_code == 201, made.content
    return made.json()["id"]


def approve(api, approval_id: str, body: dict | None = None):
    return api.raw(
        "POST",
        f"/api/v1/approvals/{approval_id}/approve",
        json.dumps(body) if body is not None else b"",
    )


@pytest.fixture
def bot(alice_api) -> str:
    """Agent `bot` of alice, granted slack only; its token."""
    assert put_agent(alice_api, "bot", ["slack"], access=None).status_code == 201
    return agent_token(alice_api, "bot")


def bots_grant(service: str) -> Grant:
    return Grant.objects.get(agent__name="bot", service=service)


@pytest.mark.django_db
class TestAsking:
    def test_an_agent_asks_and_waits_24_hours(self, bot, alice):
        before = timezone.now()
        made = ask(bot, {"services": [ASKED, "Notion"], "reason": "Triage.", "validForMinutes": 90})
        assert made.status_code == 201
        body = made.json()
        assert set(body) == {"id", "status", "approvalUrl", "expiresAt"}
        assert body["status"] == "pending"
        assert body["approvalUrl"] == f"http://127.0.0.1:8000/approvals/{body['id']}"
        stored = Approval.objects.get(id=body["id"])
        assert (stored.kind, stored.account_id, stored.agent.name) == ("access", alice.pk, "bot")
        assert before + timedelta(hours=24) <= stored.expires_at
        assert stored.expires_at <= timezone.now() + timedelta(hours=24)
        assert [entry["service"] for entry in stored.services] == ["github", "notion"]
        assert stored.services[0]["methods"] == ["GET", "POST"]
        assert (stored.reason, stored.valid_for_minutes) == ("Triage.", 90)
        event = AuditEvent.objects.get(action="access_request.created")
        assert (event.target, event.agent_name, event.status) == (body["id"], "bot", 201)

    @pytest.mark.parametrize(
        ("body", "fields"),
        [
            ({"services": [ASKED], "reason": ""}, ["reason"]),
            ({"services": [ASKED], "reason": "x" * 501}, ["reason"]),
            ({"services": [ASKED], "reason": "a\u0000b"}, ["reason"]),
            ({"services": [ASKED]}, ["reason"]),
            ({"services": [], "reason": "r"}, ["services"]),
            ({"services": [ASKED], "reason": "r", "validForMinutes": 0}, ["validForMinutes"]),
            (
                {"services": [ASKED], "reason": "r", "validForMinutes": 525_601},
                ["validForMinutes"],
            ),
            ({"services": [{"service": "github", "methods": ["TRACE"]}], "reason": "r"}, None),
            ({"services": ["../etc"], "reason": "r"}, ["services[0]"]),
            (
                {"services": ["github", {"service": "GitHub", "access": "read"}], "reason": "r"},
                None,
            ),
            ({"services": [ASKED], "reason": "r", "approve": True}, ["approve"]),
        ],
    )
    def test_a_bad_request_is_400_naming_its_fields(self, bot, body, fields):
        problem = assert_problem(ask(bot, body), 400, "invalid_request")
        if fields is not None:
            assert [error["field"] for error in problem["errors"]] == fields
        assert not Approval.objects.exists()

    def test_the_sixth_pending_is_429(self, alice_api, bot, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        Grant.objects.create(
            agent=bots_grant("slack").agent,
            service="github",
            approve=[{"methods": ["POST"]}],
        )
        for index in range(3):
            asked = call(bot, "POST", "github", f"/repos/o/r{index}")
            assert_problem(asked, 403, "approval_required")
        asked_id(bot)
        asked_id(bot, ["notion"])
        refused = ask(bot, {"services": ["linear"], "reason": "One too many."})
        assert_problem(refused, 429, "too_many_pending")
        assert refused["Retry-After"] == "60"
        assert Approval.objects.filter(status="pending").count() == 5
        recorded = AuditEvent.objects.get(action="access_request.created", outcome="refused")
        assert (recorded.status, recorded.agent_name) == (429, "bot")
        assert_problem(call(bot, "POST", "github", "/repos/o/r9"), 429, "too_many_pending")

    def test_an_account_token_cannot_ask(self, alice_api):
        made = alice_api.raw("POST", REQUESTS, json.dumps({"services": [ASKED], "reason": "r"}))
        assert_problem(made, 403, "insufficient_scope")


@pytest.mark.django_db
class TestReading:
    def test_the_agent_reads_its_own_request(self, bot):
        approval_id = asked_id(bot, validForMinutes=30)
        response = read(bot, approval_id)
        assert response.status_code == 200
        body = response.json()
        assert (body["id"], body["status"], body["reason"], body["validForMinutes"]) == (
            approval_id,
            "pending",
            "Triage issues.",
            30,
        )
        assert body["services"] == [{**ASKED, "access": "proxy", "graphql": []}]
        assert "granted" not in body
        assert "decidedBy" not in body
        assert AuditEvent.objects.filter(action="access_request.read", target=approval_id)

    def test_another_agents_request_or_an_unknown_one_is_404(self, alice_api, bot, bob_api):
        approval_id = asked_id(bot)
        assert put_agent(alice_api, "other", ["slack"]).status_code == 201
        other = agent_token(alice_api, "other")
        assert_problem(read(other, approval_id), 404, "approval_not_found")
        assert put_agent(bob_api, "bot", ["slack"]).status_code == 201
        bobs = agent_token(bob_api, "bot")
        assert_problem(read(bobs, approval_id), 404, "approval_not_found")
        assert_problem(read(bot, "apv_" + "y" * 22), 404, "approval_not_found")
        refused = AuditEvent.objects.filter(action="access_request.read", outcome="refused")
        assert refused.count() == 3

    def test_a_calls_approval_is_not_an_access_request(self, alice_api, bot, provider_server):
        Grant.objects.create(agent=bots_grant("slack").agent, service="github", approve=[{}])
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        call_id = assert_problem(call(bot, "GET", "github", "/user"), 403, "approval_required")[
            "approvalId"
        ]
        assert_problem(read(bot, call_id), 404, "approval_not_found")

    def test_an_account_token_cannot_read(self, alice_api, bot):
        approval_id = asked_id(bot)
        response = alice_api.client.get(f"{REQUESTS}/{approval_id}", headers=alice_api.headers())
        assert_problem(response, 403, "insufficient_scope")

    def test_past_its_expiry_it_reads_expired_recorded_once(self, bot):
        approval_id = asked_id(bot)
        Approval.objects.filter(id=approval_id).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert read(bot, approval_id).json()["status"] == "expired"
        assert read(bot, approval_id).json()["status"] == "expired"
        assert AuditEvent.objects.filter(action="access_request.expired").count() == 1


@pytest.mark.django_db
class TestApproving:
    def test_as_asked_the_agent_gains_the_grants(
        self, alice_api, alice_account_and_token, bot, provider_server
    ):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        provider_server.answer(200, {"ok": True})
        approval_id = asked_id(bot)
        assert_problem(call(bot, "GET", "github", "/repos/acme/app"), 403, "not_granted")
        response = approve(alice_api, approval_id)
        assert response.status_code == 200
        body = response.json()
        prefix = alice_account_and_token[1][:12]
        assert (body["status"], body["decidedBy"]) == ("approved", prefix)
        assert body["granted"] == [{**ASKED, "access": "proxy", "graphql": []}]
        assert "allowedUntil" not in body
        grant = bots_grant("github")
        assert (grant.methods, grant.paths, grant.access, grant.expires_at) == (
            ["GET", "POST"],
            ["/repos/acme"],
            "proxy",
            None,
        )
        assert call(bot, "GET", "github", "/repos/acme/app").status_code == 200
        assert_problem(call(bot, "GET", "github", "/user"), 403, "not_granted")
        shown = read(bot, approval_id).json()
        assert (shown["status"], shown["granted"]) == ("approved", body["granted"])
        event = AuditEvent.objects.get(action="access_request.approved")
        assert (event.token_prefix, event.target, event.agent_name) == (prefix, approval_id, "bot")

    def test_narrower_and_for_a_time(self, alice_api, bot):
        approval_id = asked_id(bot, [ASKED, "notion"], validForMinutes=120)
        narrower = {
            "services": [{"service": "GitHub", "methods": ["GET"], "paths": ["/repos/acme/app"]}],
            "validForMinutes": 60,
        }
        before = timezone.now()
        response = approve(alice_api, approval_id, narrower)
        assert response.status_code == 200
        assert response.json()["granted"] == [
            {
                "service": "github",
                "access": "proxy",
                "methods": ["GET"],
                "paths": ["/repos/acme/app"],
                "graphql": [],
            }
        ]
        grant = bots_grant("github")
        assert (grant.methods, grant.paths) == (["GET"], ["/repos/acme/app"])
        assert before + timedelta(minutes=60) <= grant.expires_at
        assert grant.expires_at <= timezone.now() + timedelta(minutes=60)
        assert not Grant.objects.filter(service="notion").exists()
        assert Approval.objects.get(id=approval_id).allowed_until == grant.expires_at

    def test_asked_for_a_time_approved_as_asked_expires_then(self, alice_api, bot):
        approval_id = asked_id(bot, validForMinutes=15)
        assert approve(alice_api, approval_id).status_code == 200
        assert bots_grant("github").expires_at <= timezone.now() + timedelta(minutes=15)

    @pytest.mark.parametrize(
        ("given", "field"),
        [
            ({"services": ["linear"]}, "services[0]"),
            ({"services": [{**ASKED, "service": "linear"}]}, "services[0].service"),
            ({"services": [{**ASKED, "access": "read"}]}, "services[0].access"),
            ({"services": [{**ASKED, "methods": ["GET", "DELETE"]}]}, "services[0].methods"),
            ({"services": [{**ASKED, "paths": ["/repos"]}]}, "services[0].paths"),
            ({"services": [{**ASKED, "paths": ["/"]}]}, "services[0].paths"),
            ({"services": [{**ASKED, "paths": ["/repos/acmex"]}]}, "services[0].paths"),
            ({"services": ["github"]}, "services[0].methods"),
            ({"validForMinutes": 61}, "validForMinutes"),
        ],
    )
    def test_wider_than_asked_is_400_naming_it(self, alice_api, bot, given, field):
        approval_id = asked_id(bot, validForMinutes=60)
        problem = assert_problem(approve(alice_api, approval_id, given), 400, "invalid_request")
        assert field in [error["field"] for error in problem["errors"]]
        assert {error["code"] for error in problem["errors"]} == {"wider_than_asked"}
        assert Approval.objects.get(id=approval_id).status == "pending"
        assert not Grant.objects.filter(service__in=["github", "linear"]).exists()

    def test_the_base_and_graphql_no_wider(self, alice_api, bot):
        asked = {"service": "huggingface", "base": "router"}
        approval_id = asked_id(bot, [asked, {"service": "github", "graphql": []}])
        given = {"services": [{"service": "huggingface"}, {"service": "github", "graphql": []}]}
        problem = assert_problem(approve(alice_api, approval_id, given), 400, "invalid_request")
        assert [error["field"] for error in problem["errors"]] == ["services[0].base"]
        assert approve(alice_api, approval_id, {"services": [asked]}).status_code == 200

    def test_a_member_is_recorded_as_who_decided(self, bot, alice):
        approval_id = asked_id(bot)
        decider = Decider(account_id=alice.pk, request_id="t", member="person@example.com")
        narrower = given_in_list([GrantSpec.given("github", methods=["GET"], paths=["/repos"])])
        with pytest.raises(InvalidRequest) as refused:
            approve_access(decider=decider, approval_id=approval_id, services=narrower)
        assert refused.value.errors[0]["field"] == "services[0].paths"
        exact = given_in_list([GrantSpec.given("github", methods=["GET"], paths=["/repos/acme"])])
        approved = approve_access(decider=decider, approval_id=approval_id, services=exact)
        assert approved.decided_by == "person@example.com"
        event = AuditEvent.objects.get(action="access_request.approved")
        assert (event.member, event.token_prefix) == ("person@example.com", "member")

    def test_an_existing_grant_is_replaced_keeping_its_approve_rules(self, alice_api, bot):
        rules = [{"methods": ["POST"]}]
        Grant.objects.filter(agent__name="bot", service="slack").update(approve=rules)
        approval_id = asked_id(bot, [{"service": "slack", "methods": ["GET", "POST"]}])
        assert approve(alice_api, approval_id).status_code == 200
        grant = bots_grant("slack")
        assert (grant.methods, grant.approve) == (["GET", "POST"], rules)
        assert Grant.objects.filter(agent__name="bot").count() == 1

    def test_approve_rules_asked_are_kept_and_cannot_be_left_out(self, alice_api, bot):
        rule = {"methods": ["POST"], "paths": ["/repos/acme"]}
        approval_id = asked_id(bot, [{**ASKED, "approve": [rule]}])
        problem = assert_problem(
            approve(alice_api, approval_id, {"services": [ASKED]}), 400, "invalid_request"
        )
        assert [error["field"] for error in problem["errors"]] == ["services[0].approve"]
        assert approve(alice_api, approval_id).status_code == 200
        assert bots_grant("github").approve == [rule]

    def test_an_expiry_inside_a_grant_asked_is_400(self, bot):
        later = (timezone.now() + timedelta(hours=1)).isoformat()
        problem = assert_problem(
            ask(bot, {"services": [{**ASKED, "expiresAt": later}], "reason": "r"}),
            400,
            "invalid_request",
        )
        assert "services[0].expiresAt" in [error["field"] for error in problem["errors"]]

    def test_a_decision_is_final(self, alice_api, bot):
        approval_id = asked_id(bot)
        assert approve(alice_api, approval_id).status_code == 200
        assert_problem(approve(alice_api, approval_id), 409, "approval_decided")
        denied = alice_api.raw("POST", f"/api/v1/approvals/{approval_id}/deny")
        assert_problem(denied, 409, "approval_decided")

    def test_denied_the_agent_reads_denied_and_gains_nothing(self, alice_api, bot):
        approval_id = asked_id(bot)
        denied = alice_api.raw("POST", f"/api/v1/approvals/{approval_id}/deny")
        assert denied.json()["status"] == "denied"
        body = read(bot, approval_id).json()
        assert (body["status"], "granted" in body) == ("denied", False)
        assert not Grant.objects.filter(service="github").exists()


@pytest.mark.django_db
def test_a_stored_value_in_the_reason_is_redacted(alice_api, bot):
    value = marked("slack")
    assert alice_api.store("slack", creds(api_key=value)).status_code == 201
    approval_id = asked_id(bot, reason=f"Because {value} works.")
    stored = Approval.objects.get(id=approval_id)
    assert value not in stored.reason
    assert "[REDACTED]" in stored.reason
    listed = alice_api.client.get("/api/v1/approvals", headers=alice_api.headers())
    assert value.encode() not in listed.content
    assert value.encode() not in read(bot, approval_id).content
