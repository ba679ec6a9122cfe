"""The account API decides: GET /api/v1/approvals lists the account's approvals newest first,
POST .../approve and .../deny decide each once, with the account token's prefix recorded as
who decided. Calls are asked through the proxy route against a provider on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from services.models import Approval, AuditEvent, Grant
from tests.support.helpers import (
    agent_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)

LIST = "/api/v1/approvals"
STORED = marked("gh")


def approve(api, approval_id: str, body: dict | None = None):
    return api.raw(
        "POST", f"{LIST}/{approval_id}/approve", json.dumps(body) if body is not None else b""
    )


def deny(api, approval_id: str):
    return api.raw("POST", f"{LIST}/{approval_id}/deny")


def listed(api, query: str = ""):
    return api.client.get(LIST + query, headers=api.headers())


@pytest.fixture
def guarded(alice_api, provider_server):
    """Alice's github set and agent `bot`, whose POSTs under /repos need an approval."""
    assert alice_api.store("github", creds(api_key=STORED)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    return agent_token(alice_api, "bot")


def ask(token: str, path: str = "/repos/o/r/issues", body: bytes = b'{"t":1}', query: str = ""):
    """The approval id of a call that needs one."""
    asked = call(token, "POST", "github", path, body=body, query=query)
    return assert_problem(asked, 403, "approval_required")["approvalId"]


def access_request(token: str) -> str:
    made = Client().post(
        "/api/v1/agent/access-requests",
        json.dumps({"services": ["slack"], "reason": "Post the weekly summary."}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert made.status_code == 201, made.content
    return made.json()["id"]


@pytest.mark.django_db
class TestListing:
    def test_a_call_is_listed_as_asked_with_stored_values_redacted(self, guarded, alice_api):
        body = json.dumps({"title": "x", "leak": STORED}).encode()
        approval_id = ask(guarded, body=body, query=f"q={STORED}")
        response = listed(alice_api)
        assert response.status_code == 200
        assert STORED.encode() not in response.content
        [shown] = response.json()
        assert shown == {
            "id": approval_id,
            "kind": "call",
            "agent": "bot",
            "status": "pending",
            "createdAt": shown["createdAt"],
            "expiresAt": shown["expiresAt"],
            "approvalUrl": f"http://127.0.0.1:8000/approvals/{approval_id}",
            "service": "github",
            "method": "POST",
            "path": "/repos/o/r/issues",
            "query": shown["query"],
            "body": shown["body"],
        }
        assert "q=" in shown["query"]
        assert json.loads(shown["body"])["title"] == "x"
        assert AuditEvent.objects.filter(action="approvals.list", outcome="success").count() == 1

    def test_a_cut_body_says_so(self, guarded, alice_api):
        ask(guarded, body=json.dumps({"t": "x" * 5000}).encode())
        [shown] = listed(alice_api).json()
        assert shown["bodyCut"] is True
        assert len(shown["body"]) == 4096

    def test_newest_first_and_filtered_by_status(self, guarded, alice_api):
        first = ask(guarded, "/repos/o/one")
        second = ask(guarded, "/repos/o/two")
        third = ask(guarded, "/repos/o/three")
        Approval.objects.filter(id=first).update(created_at=timezone.now() - timedelta(minutes=2))
        Approval.objects.filter(id=second).update(created_at=timezone.now() - timedelta(minutes=1))
        assert approve(alice_api, first).status_code == 200
        assert deny(alice_api, second).status_code == 200
        assert [a["id"] for a in listed(alice_api).json()] == [third, second, first]
        assert [a["id"] for a in listed(alice_api, "?status=approved").json()] == [first]
        assert [a["id"] for a in listed(alice_api, "?status=denied").json()] == [second]
        assert [a["id"] for a in listed(alice_api, "?status=pending").json()] == [third]
        assert listed(alice_api, "?status=expired").json() == []

    @pytest.mark.parametrize("value", ["bogus", "", "PENDING"])
    def test_a_bad_status_is_400(self, guarded, alice_api, value):
        problem = assert_problem(listed(alice_api, f"?status={value}"), 400, "invalid_request")
        assert [error["field"] for error in problem["errors"]] == ["status"]

    def test_another_accounts_approvals_are_not_listed(self, guarded, bob_api):
        ask(guarded)
        response = listed(bob_api)
        assert (response.status_code, response.json()) == (200, [])

    def test_listing_marks_one_past_its_expiry_expired_once(self, guarded, alice_api):
        approval_id = ask(guarded)
        Approval.objects.filter(id=approval_id).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert listed(alice_api).json()[0]["status"] == "expired"
        assert listed(alice_api, "?status=expired").json()[0]["id"] == approval_id
        assert Approval.objects.get(id=approval_id).status == "expired"
        expired = AuditEvent.objects.filter(action="approval.expired", target=approval_id)
        assert expired.count() == 1

    def test_an_agent_token_cannot_list_or_decide(self, guarded):
        approval_id = ask(guarded)
        headers = {"Authorization": f"Bearer {guarded}"}
        client = Client()
        assert_problem(client.get(LIST, headers=headers), 403, "insufficient_scope")
        response = client.post(f"{LIST}/{approval_id}/approve", headers=headers)
        assert_problem(response, 403, "insufficient_scope")
        assert Approval.objects.get(id=approval_id).status == "pending"


@pytest.mark.django_db
class TestDeciding:
    def test_allowed_once_the_call_goes_through_once(
        self, guarded, alice_api, alice_account_and_token, provider_server
    ):
        provider_server.answer(201, {"id": 1})
        approval_id = ask(guarded)
        response = approve(alice_api, approval_id)
        assert response.status_code == 200
        shown = response.json()
        prefix = alice_account_and_token[1][:12]
        assert (shown["id"], shown["status"], shown["decidedBy"]) == (
            approval_id,
            "approved",
            prefix,
        )
        assert shown["decidedAt"]
        assert "allowedUntil" not in shown
        stored = Approval.objects.get(id=approval_id)
        assert (stored.status, stored.decided_by, stored.allowed_until) == (
            "approved",
            prefix,
            None,
        )
        event = AuditEvent.objects.get(action="approval.approved")
        assert (event.token_prefix, event.target, event.agent_name, event.member) == (
            prefix,
            approval_id,
            "bot",
            "",
        )
        assert call(guarded, "POST", "github", "/repos/o/r/issues", body=b'{"t":1}').status_code
        assert len(provider_server.requests) == 1
        assert listed(alice_api).json()[0]["usedAt"]

    def test_allowed_for_minutes(self, guarded, alice_api, provider_server):
        provider_server.answer(201, {"id": 1})
        approval_id = ask(guarded)
        before = timezone.now()
        shown = approve(alice_api, approval_id, {"allowForMinutes": 30}).json()
        assert shown["status"] == "approved"
        until = Approval.objects.get(id=approval_id).allowed_until
        assert before + timedelta(minutes=30) <= until <= timezone.now() + timedelta(minutes=30)
        assert shown["allowedUntil"]
        assert call(guarded, "POST", "github", "/repos/o/other").status_code == 201

    @pytest.mark.parametrize("minutes", [0, 1441, -1, "30", 1.5, None, True])
    def test_allow_for_minutes_out_of_range_is_400(self, guarded, alice_api, minutes):
        approval_id = ask(guarded)
        problem = assert_problem(
            approve(alice_api, approval_id, {"allowForMinutes": minutes}), 400, "invalid_request"
        )
        assert [error["field"] for error in problem["errors"]] == ["allowForMinutes"]
        assert Approval.objects.get(id=approval_id).status == "pending"

    def test_denied(self, guarded, alice_api, alice_account_and_token, provider_server):
        approval_id = ask(guarded)
        response = deny(alice_api, approval_id)
        assert response.status_code == 200
        assert (response.json()["status"], response.json()["decidedBy"]) == (
            "denied",
            alice_account_and_token[1][:12],
        )
        assert Approval.objects.get(id=approval_id).status == "denied"
        event = AuditEvent.objects.get(action="approval.denied")
        assert (event.target, event.token_prefix) == (approval_id, alice_account_and_token[1][:12])
        assert_problem(
            call(guarded, "POST", "github", "/repos/o/r/issues", body=b'{"t":1}'),
            403,
            "approval_denied",
        )
        assert provider_server.requests == []

    @pytest.mark.parametrize(
        ("first", "second"), [("approve", "approve"), ("approve", "deny"), ("deny", "approve")]
    )
    def test_a_decision_is_final(self, guarded, alice_api, first, second):
        approval_id = ask(guarded)
        decide = {"approve": approve, "deny": deny}
        assert decide[first](alice_api, approval_id).status_code == 200
        status = Approval.objects.get(id=approval_id).status
        assert_problem(decide[second](alice_api, approval_id), 409, "approval_decided")
        assert Approval.objects.get(id=approval_id).status == status
        refused = AuditEvent.objects.exclude(action="agent.proxy").get(outcome="refused")
        assert (refused.action, refused.status, refused.target) == (
            {"approve": "approval.approved", "deny": "approval.denied"}[second],
            409,
            approval_id,
        )

    def test_a_decision_past_the_expiry_is_409_and_the_expiry_recorded(self, guarded, alice_api):
        approval_id = ask(guarded)
        Approval.objects.filter(id=approval_id).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert_problem(approve(alice_api, approval_id), 409, "approval_decided")
        assert Approval.objects.get(id=approval_id).status == "expired"
        assert AuditEvent.objects.filter(action="approval.expired").count() == 1

    @pytest.mark.parametrize("decision", ["approve", "deny"])
    def test_unknown_or_another_accounts_id_is_404(self, guarded, bob_api, alice_api, decision):
        approval_id = ask(guarded)
        decide = {"approve": approve, "deny": deny}[decision]
        assert_problem(decide(bob_api, approval_id), 404, "approval_not_found")
        assert_problem(decide(alice_api, "apv_" + "x" * 22), 404, "approval_not_found")
        assert_problem(decide(alice_api, "nothing-like-an-id"), 404, "approval_not_found")
        assert Approval.objects.get(id=approval_id).status == "pending"
        decided = AuditEvent.objects.filter(
            action__in=["approval.approved", "approval.denied"], outcome="success"
        )
        assert not decided.exists()

    def test_a_calls_approval_takes_no_access_option(self, guarded, alice_api):
        approval_id = ask(guarded)
        body = {"services": ["github"], "validForMinutes": 5}
        problem = assert_problem(approve(alice_api, approval_id, body), 400, "invalid_request")
        assert sorted(error["field"] for error in problem["errors"]) == [
            "services",
            "validForMinutes",
        ]
        assert Approval.objects.get(id=approval_id).status == "pending"

    def test_an_access_request_takes_no_call_option(self, guarded, alice_api):
        approval_id = access_request(guarded)
        problem = assert_problem(
            approve(alice_api, approval_id, {"allowForMinutes": 5}), 400, "invalid_request"
        )
        assert [error["field"] for error in problem["errors"]] == ["allowForMinutes"]
        assert Approval.objects.get(id=approval_id).status == "pending"

    def test_an_access_request_is_listed_and_denied(self, guarded, alice_api):
        approval_id = access_request(guarded)
        [shown] = listed(alice_api).json()
        assert shown["kind"] == "access"
        assert shown["reason"] == "Post the weekly summary."
        assert shown["services"][0]["service"] == "slack"
        assert "service" not in shown
        assert deny(alice_api, approval_id).json()["status"] == "denied"
        assert AuditEvent.objects.filter(action="access_request.denied").count() == 1
        assert not Grant.objects.filter(service="slack").exists()

    def test_unknown_member_and_malformed_bodies_are_400(self, guarded, alice_api):
        approval_id = ask(guarded)
        assert_problem(approve(alice_api, approval_id, {"once": True}), 400, "invalid_request")
        bad = alice_api.raw("POST", f"{LIST}/{approval_id}/approve", b"{")
        assert_problem(bad, 400, "malformed_json")
        assert Approval.objects.get(id=approval_id).status == "pending"
