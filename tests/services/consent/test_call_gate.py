"""The consent gate of a brokered call, driven through the proxy route against a real provider
on 127.0.0.1: a call an `approve` rule covers is asked, sent nothing, and goes through once a
member allowed it, once."""

from __future__ import annotations

import pytest

from services.consent.decisions import Decider, approve_call, deny
from services.models import Approval, AuditEvent, Grant
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent


@pytest.fixture
def guarded(alice_api, provider_server, alice):
    """Alice's github set and agent `bot`, whose POSTs under /repos need an approval."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    return agent_token(alice_api, "bot")


def decider(alice) -> Decider:
    return Decider(account_id=alice.pk, request_id="test", member="person@example.com")


@pytest.mark.django_db
class TestTheGate:
    def test_a_call_outside_every_rule_goes_through(self, guarded, provider_server):
        provider_server.answer(200, {"ok": True})
        assert call(guarded, "GET", "github", "/repos/o/r").status_code == 200

    def test_asked_then_allowed_once(self, guarded, provider_server, alice):
        provider_server.answer(201, {"id": 1})
        asked = assert_problem(
            call(guarded, "POST", "github", "/repos/o/r/issues", body=b'{"t":1}'),
            403,
            "approval_required",
        )
        assert provider_server.requests == []
        assert asked["approvalUrl"].endswith("/approvals/" + asked["approvalId"])
        pending = call(guarded, "POST", "github", "/repos/o/r/issues", body=b'{"t":1}')
        assert_problem(pending, 403, "approval_pending")
        assert pending["Retry-After"]
        mismatch = call(
            guarded,
            "POST",
            "github",
            "/repos/o/r/issues",
            body=b'{"t":2}',
            headers={"X-Credvault-Approval": asked["approvalId"]},
        )
        assert_problem(mismatch, 403, "approval_mismatch")
        approve_call(decider=decider(alice), approval_id=asked["approvalId"])
        sent = call(guarded, "POST", "github", "/repos/o/r/issues", body=b'{"t":1}')
        assert sent.status_code == 201
        assert len(provider_server.requests) == 1
        assert "x-credvault-approval" not in {
            k.lower() for k in provider_server.requests[0].headers
        }
        again = call(guarded, "POST", "github", "/repos/o/r/issues", body=b'{"t":1}')
        assert_problem(again, 403, "approval_required")
        actions = list(AuditEvent.objects.values_list("action", flat=True))
        for action in ("approval.requested", "approval.approved", "approval.used"):
            assert action in actions
        assert AuditEvent.objects.get(action="approval.approved").member == "person@example.com"

    def test_allowed_for_minutes_covers_the_rule(self, guarded, provider_server, alice):
        provider_server.answer(201, {"id": 1})
        asked = assert_problem(
            call(guarded, "POST", "github", "/repos/o/r/issues"), 403, "approval_required"
        )
        approve_call(decider=decider(alice), approval_id=asked["approvalId"], allow_for_minutes=30)
        assert call(guarded, "POST", "github", "/repos/o/r/issues").status_code == 201
        assert call(guarded, "POST", "github", "/repos/other/x").status_code == 201
        Approval.objects.update(allowed_until="2000-01-01T00:00:00Z")
        assert_problem(
            call(guarded, "POST", "github", "/repos/o/r/issues"), 403, "approval_required"
        )

    def test_denied(self, guarded, provider_server, alice):
        asked = assert_problem(
            call(guarded, "POST", "github", "/repos/o/r/issues"), 403, "approval_required"
        )
        deny(decider=decider(alice), approval_id=asked["approvalId"])
        assert_problem(call(guarded, "POST", "github", "/repos/o/r/issues"), 403, "approval_denied")
        assert provider_server.requests == []

    def test_at_most_five_pending(self, guarded):
        for index in range(5):
            assert_problem(
                call(guarded, "POST", "github", f"/repos/o/r{index}"), 403, "approval_required"
            )
        assert_problem(call(guarded, "POST", "github", "/repos/o/r9"), 429, "too_many_pending")
