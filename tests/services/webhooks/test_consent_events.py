"""Consent's events: a call's approval asked for and decided, an access request made and
decided, each written with its change and delivered signed; none holds what was asked."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from services.models import Grant, WebhookEvent
from services.webhooks.worker import deliver_due
from tests.services.webhooks.conftest import create_webhook
from tests.support.helpers import agent_token, call, creds, marked, put_agent

pytestmark = pytest.mark.django_db


def test_a_calls_approval_and_an_access_request_raise_their_events(
    alice_api, alice, receiver, provider_server
):
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(approve=[{"methods": ["POST"]}])
    token = agent_token(alice_api, "bot")
    assert create_webhook(alice_api, receiver.url).status_code == 201
    secret_body = json.dumps({"title": marked("body-text")}).encode()
    asked = call(token, "POST", "github", "/repos/o/r/issues", body=secret_body).json()
    decided = alice_api.raw("POST", f"/api/v1/approvals/{asked['approvalId']}/deny")
    assert decided.status_code == 200
    access = call(token, "GET", "github", "/")  # not under the rule: no event
    assert access.status_code != 403
    made = Client().post(
        "/api/v1/agent/access-requests",
        json.dumps({"services": ["linear"], "reason": "Triage."}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert made.status_code == 201
    approved = alice_api.raw("POST", f"/api/v1/approvals/{made.json()['id']}/approve")
    assert approved.status_code == 200

    raised = list(WebhookEvent.objects.order_by("sequence").values_list("type", "data"))
    consent = [(kind, data) for kind, data in raised if not kind.startswith("connection.")]
    assert [kind for kind, _ in consent] == [
        "approval.requested",
        "approval.decided",
        "access_request.created",
        "access_request.decided",
    ]
    requested, denied, created, granted = (data for _, data in consent)
    assert requested["approvalId"] == asked["approvalId"]
    assert requested["approvalUrl"] == asked["approvalUrl"]
    assert (requested["status"], requested["service"], requested["agent"]) == (
        "pending",
        "github",
        "bot",
    )
    assert (denied["status"], denied["decidedAt"][-1]) == ("denied", "Z")
    assert (created["kind"], created["status"]) == ("access", "pending")
    assert granted["status"] == "approved"
    assert "service" not in created
    assert deliver_due() == len(raised)
    delivered = repr([each.body for each in receiver.received])
    assert "body-text" not in delivered
    assert value not in delivered
    assert "/repos/o/r/issues" not in delivered
