"""The account API of webhook endpoints: shapes, refusals, isolation and audit."""

from __future__ import annotations

import json

import pytest

from services.models import AuditEvent, WebhookEndpoint
from services.webhooks.worker import deliver_due
from tests.services.webhooks.conftest import create_webhook
from tests.support.helpers import assert_problem

pytestmark = pytest.mark.django_db

PUBLIC = "https://hooks.example.com/credvault"


def test_create_shows_the_secret_once(alice_api, receiver):
    created = create_webhook(
        alice_api, receiver.url, events=["connection.created"], description="ops"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert set(body) == {"id", "url", "events", "description", "enabled", "secret", "createdAt"}
    assert body["id"].startswith("wh_")
    assert body["events"] == ["connection.created"]
    listed = alice_api.raw("GET", "/api/v1/webhooks")
    assert listed.status_code == 200
    assert body["secret"] not in listed.content.decode()
    assert [each["id"] for each in listed.json()] == [body["id"]]
    shown = alice_api.raw("GET", f"/api/v1/webhooks/{body['id']}").json()
    assert "secret" not in shown
    assert shown["disabledReason"] is None
    actions = list(AuditEvent.objects.values_list("action", "target"))
    assert ("webhooks.create", body["id"]) in actions


def test_an_http_url_of_a_host_not_allowed_is_refused(alice_api):
    refused = create_webhook(alice_api, "http://hooks.example.com/x")
    body = assert_problem(refused, 400, "invalid_webhook_url")
    assert body["errors"][0]["field"] == "url"
    assert WebhookEndpoint.objects.count() == 0


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/x",
        "https://10.0.0.5/x",
        "https://169.254.169.254/latest",
        "https://[::ffff:127.0.0.1]/x",
        "https://localhost/x",
    ],
)
def test_a_private_address_is_refused(alice_api, url):
    assert_problem(create_webhook(alice_api, url), 400, "invalid_webhook_url")


@pytest.mark.parametrize("url", ["ftp://x.example.com/", "https:///nohost", "not a url"])
def test_what_is_not_a_url_is_refused(alice_api, url):
    assert_problem(create_webhook(alice_api, url), 400, "invalid_webhook_url")


def test_the_eleventh_endpoint_is_refused(alice_api):
    for number in range(10):
        assert create_webhook(alice_api, f"{PUBLIC}/{number}").status_code == 201
    assert_problem(create_webhook(alice_api, f"{PUBLIC}/10"), 409, "webhook_limit_reached")
    assert WebhookEndpoint.objects.count() == 10


def test_an_unknown_event_type_is_refused(alice_api):
    refused = create_webhook(alice_api, PUBLIC, events=["connection.created", "nope.never"])
    body = assert_problem(refused, 400, "unknown_event_type")
    assert body["errors"][0]["field"] == "events"


@pytest.mark.parametrize("events", [[""], ["x" * 65], [7]])
def test_an_event_type_that_is_not_a_short_text_is_a_shape_error(alice_api, events):
    body = assert_problem(create_webhook(alice_api, PUBLIC, events=events), 400, "invalid_request")
    assert body["errors"][0]["field"] == "events[0]"
    assert WebhookEndpoint.objects.count() == 0


def test_a_change_to_an_unknown_event_type_is_refused(alice_api):
    webhook_id = create_webhook(alice_api, PUBLIC, events=["agent.deleted"]).json()["id"]
    refused = alice_api.raw(
        "PATCH", f"/api/v1/webhooks/{webhook_id}", json.dumps({"events": ["nope.never"]})
    )
    body = assert_problem(refused, 400, "unknown_event_type")
    assert body["errors"][0]["field"] == "events"
    assert WebhookEndpoint.objects.get().events == ["agent.deleted"]


def test_another_accounts_endpoint_is_404(alice_api, bob_api):
    webhook_id = create_webhook(alice_api, PUBLIC).json()["id"]
    for method, path, body in [
        ("GET", f"/api/v1/webhooks/{webhook_id}", ""),
        ("PATCH", f"/api/v1/webhooks/{webhook_id}", '{"description": "mine"}'),
        ("DELETE", f"/api/v1/webhooks/{webhook_id}", ""),
        ("POST", f"/api/v1/webhooks/{webhook_id}/rotate-secret", ""),
        ("POST", f"/api/v1/webhooks/{webhook_id}/test", ""),
        ("GET", f"/api/v1/webhooks/{webhook_id}/deliveries", ""),
    ]:
        assert_problem(bob_api.raw(method, path, body), 404, "webhook_not_found")
    assert WebhookEndpoint.objects.get().description == ""
    assert bob_api.raw("GET", "/api/v1/webhooks").json() == []


def test_redeliver_of_an_unknown_or_foreign_event_is_404(alice_api, bob_api, receiver):
    webhook_id = create_webhook(alice_api, receiver.url).json()["id"]
    event_id = alice_api.raw("POST", f"/api/v1/webhooks/{webhook_id}/test").json()["eventId"]
    path = "/api/v1/webhook-deliveries/{}/redeliver"
    assert_problem(
        alice_api.raw("POST", path.format("evt_nothing")), 404, "webhook_event_not_found"
    )
    assert_problem(bob_api.raw("POST", path.format(event_id)), 404, "webhook_event_not_found")
    deliver_due()
    again = alice_api.raw("POST", path.format(event_id))
    assert again.status_code == 202, again.content
    assert again.json() == {"eventId": event_id, "queued": 1}
    deliver_due()
    assert [each.headers["webhook-id"] for each in receiver.received] == [event_id, event_id]


def test_patch_changes_what_it_names_and_is_audited(alice_api):
    webhook_id = create_webhook(alice_api, PUBLIC).json()["id"]
    changed = alice_api.raw(
        "PATCH",
        f"/api/v1/webhooks/{webhook_id}",
        json.dumps({"events": ["agent.deleted"], "enabled": False}),
    )
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert body["events"] == ["agent.deleted"]
    assert body["enabled"] is False
    assert body["url"] == PUBLIC
    assert_problem(
        alice_api.raw("PATCH", f"/api/v1/webhooks/{webhook_id}", '{"enabled": "yes"}'),
        400,
        "invalid_request",
    )
    assert_problem(
        alice_api.raw("PATCH", f"/api/v1/webhooks/{webhook_id}", '{"url": "http://x.example/"}'),
        400,
        "invalid_webhook_url",
    )
    deleted = alice_api.raw("DELETE", f"/api/v1/webhooks/{webhook_id}")
    assert deleted.status_code == 204
    assert WebhookEndpoint.objects.count() == 0
    actions = list(
        AuditEvent.objects.filter(action__startswith="webhooks.")
        .order_by("seq")
        .values_list("action", "status")
    )
    assert actions == [
        ("webhooks.create", 201),
        ("webhooks.update", 200),
        ("webhooks.update", 400),
        ("webhooks.update", 400),
        ("webhooks.delete", 204),
    ]


def test_the_deliveries_log_pages_newest_first(alice_api, receiver):
    webhook_id = create_webhook(alice_api, receiver.url).json()["id"]
    receiver.answers = [(500, {})]
    for _ in range(3):
        alice_api.raw("POST", f"/api/v1/webhooks/{webhook_id}/test")
    deliver_due()
    page = alice_api.raw("GET", f"/api/v1/webhooks/{webhook_id}/deliveries?limit=2")
    assert page.status_code == 200, page.content
    body = page.json()
    assert len(body["deliveries"]) == 2
    first = body["deliveries"][0]
    assert set(first) == {
        "id",
        "eventId",
        "type",
        "status",
        "error",
        "durationMs",
        "time",
        "nextAttemptAt",
    }
    assert first["type"] == "webhook.test"
    rest = alice_api.raw(
        "GET", f"/api/v1/webhooks/{webhook_id}/deliveries?before={body['next']}"
    ).json()
    assert rest["next"] is None
    assert [d["status"] for d in rest["deliveries"]] == [500]
    assert rest["deliveries"][0]["nextAttemptAt"] is not None
    assert_problem(
        alice_api.raw("GET", f"/api/v1/webhooks/{webhook_id}/deliveries?limit=0"),
        400,
        "invalid_request",
    )
