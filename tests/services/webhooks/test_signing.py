"""Deliveries are Standard Webhooks v1: real requests, received on 127.0.0.1, verified by the
`standardwebhooks` reference library and by Svix's, before and during a secret's rotation."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import standardwebhooks
import svix.webhooks
from django.utils import timezone

from services.models import WebhookSecret
from services.webhooks.worker import deliver_due
from tests.services.webhooks.conftest import create_webhook

# A signing secret is sealed by its account's data key: under each key manager.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("each_key_manager")]


def verify_both(secret: str, received) -> dict:
    payload = standardwebhooks.Webhook(secret).verify(received.body, received.headers)
    svix.webhooks.Webhook(secret).verify(received.body, received.headers)
    return payload


def refused_by_both(secret: str, received) -> bool:
    refusals = 0
    for library in (standardwebhooks.Webhook, svix.webhooks.Webhook):
        try:
            library(secret).verify(received.body, received.headers)
        except Exception:  # each library has its own verification error
            refusals += 1
    return refusals == 2


def test_a_test_event_is_verified_by_both_libraries(alice_api, receiver):
    created = create_webhook(alice_api, receiver.url, description="ops")
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["secret"]
    assert secret.startswith("whsec_")
    sent = alice_api.raw("POST", f"/api/v1/webhooks/{body['id']}/test")
    assert sent.status_code == 202, sent.content
    assert deliver_due() == 1
    [received] = receiver.received
    assert received.path == "/hooks"
    assert received.headers["webhook-id"] == sent.json()["eventId"]
    assert abs(int(received.headers["webhook-timestamp"]) - timezone.now().timestamp()) < 60
    payload = verify_both(secret, received)
    assert payload["type"] == "webhook.test"
    assert set(payload) == {"type", "timestamp", "data"}
    assert payload["data"]["webhookId"] == body["id"]
    assert payload["data"]["sequence"] == 1
    # A changed body, or another secret, is refused by both.
    received.body = received.body.replace(b"webhook.test", b"webhook.tesT")
    assert refused_by_both(secret, received)


def test_during_a_rotation_both_secrets_sign(alice_api, receiver):
    body = create_webhook(alice_api, receiver.url).json()
    old = body["secret"]
    rotated = alice_api.raw("POST", f"/api/v1/webhooks/{body['id']}/rotate-secret")
    assert rotated.status_code == 201, rotated.content
    new = rotated.json()["secret"]
    assert new != old
    assert new.startswith("whsec_")
    alice_api.raw("POST", f"/api/v1/webhooks/{body['id']}/test")
    deliver_due()
    [received] = receiver.received
    assert len(received.headers["webhook-signature"].split(" ")) == 2
    verify_both(old, received)
    verify_both(new, received)
    # After 24 hours the old secret signs no more.
    WebhookSecret.objects.filter(expires_at__isnull=False).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    alice_api.raw("POST", f"/api/v1/webhooks/{body['id']}/test")
    deliver_due()
    later = receiver.received[1]
    assert len(later.headers["webhook-signature"].split(" ")) == 1
    verify_both(new, later)
    assert refused_by_both(old, later)


def test_the_same_event_keeps_its_id_on_every_attempt(alice_api, receiver):
    body = create_webhook(alice_api, receiver.url).json()
    receiver.answers = [(500, {})]
    alice_api.raw("POST", f"/api/v1/webhooks/{body['id']}/test")
    deliver_due()
    from services.models import WebhookDelivery

    WebhookDelivery.objects.update(next_attempt_at=timezone.now())
    deliver_due()
    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert json.loads(first.body) == json.loads(second.body)
    verify_both(body["secret"], second)
