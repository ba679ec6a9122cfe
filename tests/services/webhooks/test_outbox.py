"""The outbox: an event is written in the transaction of its change, with the account's next
sequence, and only for endpoints that take its type."""

from __future__ import annotations

import pytest
from django.db import transaction

from services.bearer_tokens import display_prefix
from services.models import WebhookDelivery, WebhookEvent
from services.webhooks import events
from services.webhooks.worker import deliver_due
from tests.services.webhooks.conftest import create_webhook
from tests.support.helpers import agent_token, creds, marked, put_agent

pytestmark = pytest.mark.django_db


def test_a_store_writes_its_event_in_its_transaction(alice_api, alice, receiver):
    assert create_webhook(alice_api, receiver.url).status_code == 201
    value = marked("api-key")
    assert alice_api.store("custom", creds(api_key=value)).status_code == 201
    event = WebhookEvent.objects.get(account=alice)
    assert event.type == "connection.created"
    assert event.sequence == 1
    assert event.data["service"] == "custom"
    assert event.data["sequence"] == 1
    assert event.data["occurredAt"].endswith("Z")
    assert WebhookDelivery.objects.filter(event=event, state="pending").count() == 1
    assert alice_api.store("custom", creds(api_key=marked("other"))).status_code == 200
    assert alice_api.delete("custom").status_code == 204
    types = list(WebhookEvent.objects.order_by("sequence").values_list("type", "sequence"))
    assert types == [
        ("connection.created", 1),
        ("connection.replaced", 2),
        ("connection.removed", 3),
    ]
    assert deliver_due() == 3
    assert [body["type"] for body in receiver.bodies()] == [t for t, _ in types]
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


def test_an_event_for_three_endpoints_is_four_statements(
    alice, alice_api, receiver, django_assert_num_queries
):
    for _ in range(3):
        assert create_webhook(alice_api, receiver.url).status_code == 201
    for sequence in (1, 2):  # the account's sequence row made, then raised in place
        # The endpoints read, the sequence, the event, its three deliveries in one INSERT.
        with django_assert_num_queries(4):
            event = events.raise_event(account_id=alice.id, type="agent.deleted", data={})
        assert event is not None
        assert event.sequence == sequence
        stored = WebhookEvent.objects.get(pk=event.pk)
        assert stored.data == event.data
        assert event.data == {"sequence": sequence, "occurredAt": event.data["occurredAt"]}
        assert stored.occurred_at == event.occurred_at
        deliveries = WebhookDelivery.objects.filter(event=event, state="pending")
        assert sorted(deliveries.values_list("sequence", flat=True)) == [sequence] * 3
