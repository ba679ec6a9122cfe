"""The outbox: an event is written in the transaction of its change, for the endpoints that
take its type, and published by the worker with the account's next sequence."""

from __future__ import annotations

import pytest
from django.db import transaction

from services.bearer_tokens import display_prefix
from services.models import WebhookDelivery, WebhookEvent
from services.webhooks import events
from services.webhooks.publishing import publish_all, publish_events
from services.webhooks.worker import deliver_due
from tests.services.webhooks.conftest import create_webhook
from tests.support.helpers import agent_token, creds, marked, put_agent

pytestmark = pytest.mark.django_db


def test_a_store_writes_its_event_in_its_transaction(alice_api, alice, receiver):
    created = create_webhook(alice_api, receiver.url)
    assert created.status_code == 201
    endpoint_id = created.json()["id"]
    value = marked("api-key")
    assert alice_api.store("custom", creds(api_key=value)).status_code == 201
    event = WebhookEvent.objects.get(account=alice)
    assert event.type == "connection.created"
    assert event.sequence is None  # not published yet
    assert event.data == {"service": "custom", "keyType": "api_key"}
    assert not WebhookDelivery.objects.exists()
    assert alice_api.store("custom", creds(api_key=marked("other"))).status_code == 200
    assert alice_api.delete("custom").status_code == 204
    assert publish_all() == 3
    delivery = WebhookDelivery.objects.get(event=event)
    assert (delivery.endpoint_id, delivery.state, delivery.sequence) == (endpoint_id, "pending", 1)
    types = list(WebhookEvent.objects.order_by("sequence").values_list("type", "sequence"))
    assert types == [
        ("connection.created", 1),
        ("connection.replaced", 2),
        ("connection.removed", 3),
    ]
    assert deliver_due() == 3
    bodies = receiver.bodies()
    assert [body["type"] for body in bodies] == [t for t, _ in types]
    assert [body["data"]["sequence"] for body in bodies] == [1, 2, 3]
    assert all(body["data"]["occurredAt"] == body["timestamp"] for body in bodies)
    assert bodies[0]["data"]["service"] == "custom"
    assert value not in repr([each.body for each in receiver.received])


def test_a_rolled_back_change_sends_nothing(alice, receiver, alice_api):
    assert create_webhook(alice_api, receiver.url).status_code == 201

    def change_that_fails() -> None:
        with transaction.atomic():
            events.raise_event(
                account_id=alice.id, type="connection.created", data={"service": "x"}
            )
            assert WebhookEvent.objects.count() == 1
            raise RuntimeError("the change fails")

    with pytest.raises(RuntimeError, match="the change fails"):
        change_that_fails()
    assert WebhookEvent.objects.count() == 0
    assert deliver_due() == 0
    assert receiver.received == []


def test_no_endpoint_writes_no_event(alice, alice_api):
    assert alice_api.store("custom", creds(api_key=marked())).status_code == 201
    assert WebhookEvent.objects.count() == 0


def test_sequences_rise_per_account_and_subscriptions_filter(
    alice, bob, alice_api, bob_api, receiver
):
    assert create_webhook(alice_api, receiver.url, events=["agent.deleted"]).status_code == 201
    assert create_webhook(bob_api, receiver.url).status_code == 201
    for account in (alice, bob, alice, bob):
        events.raise_event(account_id=account.id, type="agent.deleted", data={"agent": "a"})
    events.raise_event(account_id=alice.id, type="connection.created", data={"service": "x"})
    assert publish_all() == 4
    alice_seq = list(
        WebhookEvent.objects.filter(account=alice).order_by("sequence").values_list("sequence")
    )
    bob_seq = list(
        WebhookEvent.objects.filter(account=bob).order_by("sequence").values_list("sequence")
    )
    assert alice_seq == [(1,), (2,)]
    assert bob_seq == [(1,), (2,)]


def test_unknown_type_is_a_programming_error(alice):
    with pytest.raises(ValueError, match="unknown event type"):
        events.raise_event(account_id=alice.id, type="nothing.happened", data={})


def test_agent_events_carry_no_token(alice_api, receiver):
    assert create_webhook(alice_api, receiver.url).status_code == 201
    put_agent(alice_api, "bot", ["custom"])
    token = agent_token(alice_api, "bot")
    prefix = display_prefix(token)
    revoke = alice_api.client.delete(
        f"/api/v1/agents/bot/tokens/{prefix}", headers=alice_api.headers()
    )
    assert revoke.status_code == 204, revoke.content
    assert (
        alice_api.client.delete("/api/v1/agents/bot", headers=alice_api.headers()).status_code
        == 204
    )
    deliver_due()
    bodies = receiver.bodies()
    assert [b["type"] for b in bodies] == [
        "agent.token_created",
        "agent.token_revoked",
        "agent.deleted",
    ]
    assert bodies[0]["data"]["agent"] == "bot"
    assert token not in repr([each.body for each in receiver.received])


def test_an_event_for_three_endpoints_is_one_row_in_two_statements(
    alice, alice_api, receiver, django_assert_num_queries
):
    ids = [create_webhook(alice_api, receiver.url).json()["id"] for _ in range(3)]
    # The endpoints read, the event written: its sequence and deliveries are the worker's.
    with django_assert_num_queries(2):
        raised = events.raise_event(account_id=alice.id, type="agent.deleted", data={})
    assert raised is not None
    stored = WebhookEvent.objects.get(pk=raised)
    assert (stored.type, stored.sequence) == ("agent.deleted", None)
    assert not WebhookDelivery.objects.exists()
    assert publish_all() == 1
    deliveries = WebhookDelivery.objects.filter(event_id=raised, sequence=1, state="pending")
    assert sorted(deliveries.values_list("endpoint_id", flat=True)) == sorted(ids)


def test_publishing_numbers_each_account_in_order_and_skips_deleted_endpoints(
    alice, bob, alice_api, bob_api, receiver
):
    kept = create_webhook(alice_api, receiver.url).json()["id"]
    gone = create_webhook(alice_api, receiver.url).json()["id"]
    assert create_webhook(bob_api, receiver.url).status_code == 201
    for number in range(3):
        for account in (alice, bob):
            events.raise_event(account_id=account.id, type="agent.deleted", data={"n": number})
    assert alice_api.raw("DELETE", f"/api/v1/webhooks/{gone}").status_code == 204
    assert publish_events(limit=4) == 4  # a batch, then the rest
    assert publish_events() == 2
    assert publish_events() == 0
    for account in (alice, bob):
        published = WebhookEvent.objects.filter(account=account).order_by("sequence")
        assert [(e.sequence, e.data["n"]) for e in published] == [(1, 0), (2, 1), (3, 2)]
    alice_deliveries = WebhookDelivery.objects.filter(event__account=alice)
    assert set(alice_deliveries.values_list("endpoint_id", flat=True)) == {kept}
    assert sorted(alice_deliveries.values_list("sequence", flat=True)) == [1, 2, 3]
    # Numbers go on from the account's last one.
    events.raise_event(account_id=alice.id, type="agent.deleted", data={"n": 3})
    publish_all()
    assert WebhookEvent.objects.get(account=alice, data__n=3).sequence == 4


def test_redeliver_of_an_event_not_yet_published_is_queued(alice, alice_api, receiver):
    assert create_webhook(alice_api, receiver.url).status_code == 201
    raised = events.raise_event(account_id=alice.id, type="agent.deleted", data={})
    assert raised is not None
    answer = alice_api.raw("POST", f"/api/v1/webhook-deliveries/{raised}/redeliver")
    assert answer.status_code == 202, answer.content
    assert answer.json()["queued"] == 1
    assert deliver_due() == 1
