"""No secret in a payload, the deliveries log, the listing, repr() or the database; the
commands show the backlog and send what is due."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from services.models import WebhookAttempt, WebhookEndpoint, WebhookEvent, WebhookSecret
from services.webhooks.publishing import publish_all
from services.webhooks.worker import deliver_due
from tests.services.webhooks.conftest import create_webhook
from tests.support.helpers import creds, marked

pytestmark = pytest.mark.django_db


def test_no_secret_in_payloads_logs_listings_or_the_database(alice_api, receiver):
    value = marked("api-key")
    body = create_webhook(alice_api, receiver.url).json()
    secret = body["secret"]
    assert alice_api.store("custom", creds(api_key=value)).status_code == 201
    assert alice_api.test("custom", creds(api_key=value)).status_code == 200
    receiver.answers = [(500, {})]
    deliver_due()
    sent = b"".join(each.body for each in receiver.received)
    assert value.encode() not in sent
    assert secret.encode() not in sent
    log = alice_api.raw("GET", f"/api/v1/webhooks/{body['id']}/deliveries").content.decode()
    listing = alice_api.raw("GET", "/api/v1/webhooks").content.decode()
    for shown in (log, listing):
        assert secret not in shown
        assert value not in shown
    for row in (WebhookEndpoint.objects.get(), WebhookSecret.objects.get()):
        assert secret not in repr(row)
        assert secret not in str(row)
    assert repr(WebhookAttempt.objects.first())
    with connection.cursor() as cursor:
        for table in (
            "services_webhooksecret",
            "services_webhookevent",
            "services_webhookdelivery",
        ):
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 - a fixed table name
            dump = repr(cursor.fetchall())
            assert secret not in dump
            assert secret.removeprefix("whsec_") not in dump
            assert value not in dump


def test_check_webhooks_prints_the_backlog_and_deliver_webhooks_sends_it(alice_api, receiver):
    webhook_id = create_webhook(alice_api, receiver.url).json()["id"]
    alice_api.raw("POST", f"/api/v1/webhooks/{webhook_id}/test")
    WebhookEvent.objects.update(occurred_at=timezone.now() - timedelta(seconds=90))
    out = StringIO()
    call_command("check_webhooks", stdout=out)
    assert "unpublished events: 1\npending deliveries: 0\n" in out.getvalue()
    age = int(out.getvalue().split("oldest undelivered event age: ")[1].split()[0])
    assert 90 <= age < 120
    publish_all()
    out = StringIO()
    call_command("check_webhooks", stdout=out)
    assert "unpublished events: 0\npending deliveries: 1\ndue now: 1\n" in out.getvalue()
    assert "oldest undelivered event age: 9" in out.getvalue()
    sent = StringIO()
    call_command("deliver_webhooks", "--once", stdout=sent)
    assert "1 attempt(s) made" in sent.getvalue()
    assert len(receiver.received) == 1
    out = StringIO()
    call_command("check_webhooks", stdout=out)
    assert "pending deliveries: 0" in out.getvalue()
    assert "oldest undelivered event age: 0 s" in out.getvalue()
