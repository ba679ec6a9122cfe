"""The delivery schedule: retries, Retry-After, 410, five days of failures, resuming, the
endpoint's sequence order, and one slow endpoint never holding up another."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from services.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from services.webhooks import delivery as schedule
from services.webhooks import events
from services.webhooks import worker as worker_module
from services.webhooks.worker import Worker, deliver_due
from tests.services.webhooks.conftest import create_webhook, start_receiver

pytestmark = pytest.mark.django_db


def endpoint_of(api, url: str) -> str:
    created = create_webhook(api, url)
    assert created.status_code == 201, created.content
    return created.json()["id"]


def raise_one(account, name: str = "bot") -> None:
    events.raise_event(account_id=account.id, type="agent.deleted", data={"agent": name})


def make_due() -> None:
    WebhookDelivery.objects.filter(state="pending").update(next_attempt_at=timezone.now())


def test_a_failure_is_retried_on_the_schedule_until_a_2xx(alice, alice_api, receiver):
    endpoint_of(alice_api, receiver.url)
    receiver.answers = [(500, {}), (502, {})]
    raise_one(alice)
    before = timezone.now()
    assert deliver_due() == 1
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == "pending"
    assert delivery.attempts == 1
    assert delivery.last_status == 500
    # About 5 s, with jitter.
    assert timedelta(seconds=3.9) <= delivery.next_attempt_at - before <= timedelta(seconds=7)
    assert deliver_due() == 0  # not due yet
    make_due()
    deliver_due()
    delivery.refresh_from_db()
    assert delivery.attempts == 2
    assert timedelta(minutes=3.9) <= delivery.next_attempt_at - before <= timedelta(minutes=6.1)
    make_due()
    deliver_due()
    delivery.refresh_from_db()
    assert delivery.state == "delivered"
    assert delivery.next_attempt_at is None
    assert [a.status for a in WebhookAttempt.objects.order_by("pk")] == [500, 502, 200]
    assert WebhookEndpoint.objects.get().failing_since is None


def test_the_eighth_failure_ends_the_delivery(alice, alice_api, receiver):
    endpoint_of(alice_api, receiver.url)
    receiver.answers = [(500, {})] * 8
    raise_one(alice)
    for _ in range(8):
        make_due()
        deliver_due()
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == "failed"
    assert delivery.attempts == schedule.MAX_ATTEMPTS == 8
    assert len(receiver.received) == 8


def test_retry_after_is_honoured_on_429_and_503(alice, alice_api, receiver):
    endpoint_of(alice_api, receiver.url)
    receiver.answers = [(429, {"Retry-After": "120"}), (503, {"Retry-After": "3600"})]
    raise_one(alice)
    before = timezone.now()
    deliver_due()
    delivery = WebhookDelivery.objects.get()
    assert timedelta(seconds=119) <= delivery.next_attempt_at - before <= timedelta(seconds=125)
    make_due()
    before = timezone.now()
    deliver_due()
    delivery.refresh_from_db()
    assert timedelta(minutes=59) <= delivery.next_attempt_at - before <= timedelta(minutes=61)


def test_retry_after_reads_dates_and_keeps_to_its_bounds():
    now = timezone.now()
    assert schedule.retry_after_seconds("0", now=now) == 1.0
    assert schedule.retry_after_seconds("999999", now=now) == 24 * 3600
    assert schedule.retry_after_seconds("soon", now=now) is None
    in_a_minute = (now + timedelta(seconds=60)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert 55 <= schedule.retry_after_seconds(in_a_minute, now=now) <= 61


def test_410_disables_the_endpoint_and_patch_resumes_it(alice, alice_api, receiver):
    webhook_id = endpoint_of(alice_api, receiver.url)
    receiver.answers = [(410, {})]
    raise_one(alice, "one")
    deliver_due()
    shown = alice_api.raw("GET", f"/api/v1/webhooks/{webhook_id}").json()
    assert shown["enabled"] is False
    assert "410" in shown["disabledReason"]
    # Disabled: new events are not queued for it, and its pending delivery waits.
    raise_one(alice, "two")
    make_due()
    assert deliver_due() == 0
    assert len(receiver.received) == 1
    resumed = alice_api.raw("PATCH", f"/api/v1/webhooks/{webhook_id}", '{"enabled": true}')
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["enabled"] is True
    assert resumed.json()["disabledReason"] is None
    assert deliver_due() == 1
    assert [b["data"]["agent"] for b in receiver.bodies()] == ["one", "one"]
    assert WebhookDelivery.objects.get().state == "delivered"


def test_five_days_of_failures_disable_the_endpoint(alice, alice_api, receiver):
    webhook_id = endpoint_of(alice_api, receiver.url)
    receiver.answers = [(500, {}), (500, {})]
    raise_one(alice)
    deliver_due()
    endpoint = WebhookEndpoint.objects.get(pk=webhook_id)
    assert endpoint.enabled
    assert endpoint.failing_since is not None
    WebhookEndpoint.objects.update(failing_since=timezone.now() - timedelta(days=5, seconds=1))
    make_due()
    deliver_due()
    endpoint.refresh_from_db()
    assert endpoint.enabled is False
    assert "5 days" in endpoint.disabled_reason


def test_an_endpoint_gets_its_events_in_sequence_order(alice, alice_api, receiver):
    endpoint_of(alice_api, receiver.url)
    for number in range(5):
        raise_one(alice, f"agent-{number}")
    deliver_due()
    assert [b["data"]["sequence"] for b in receiver.bodies()] == [1, 2, 3, 4, 5]


def test_an_unreachable_endpoint_logs_its_failure_kind(alice, alice_api, receiver):
    dead = start_receiver()
    url = dead.url
    dead.server.shutdown()
    dead.server.server_close()
    endpoint_of(alice_api, url)
    raise_one(alice)
    deliver_due()
    attempt = WebhookAttempt.objects.get()
    assert attempt.status is None
    assert attempt.error == "unavailable"


def test_a_private_address_is_refused_at_delivery(alice, alice_api, receiver, settings):
    endpoint_of(alice_api, receiver.url)
    # The operator no longer allows the receiver's host: the next attempt is refused.
    settings.CREDVAULT_WEBHOOK_ALLOWED_HOSTS = ""
    raise_one(alice)
    deliver_due()
    assert receiver.received == []
    assert WebhookAttempt.objects.get().error == "invalid_url"


@pytest.mark.django_db(transaction=True)
def test_a_slow_endpoint_never_delays_another(alice, alice_api, receiver, settings):
    slow = start_receiver()
    try:
        slow.delay = 3.0
        endpoint_of(alice_api, slow.url)
        endpoint_of(alice_api, receiver.url)
        raise_one(alice)
        worker = Worker(threads=2, poll_seconds=0.05)
        runner = threading.Thread(target=worker.run)
        started = time.monotonic()
        runner.start()
        while not receiver.received and time.monotonic() - started < 5:
            time.sleep(0.02)
        fast_after = time.monotonic() - started
        worker.stopping.set()
        runner.join(10)
        assert receiver.received
        assert fast_after < 1.5, fast_after
        assert len(slow.received) == 1
    finally:
        slow.server.shutdown()
        slow.server.server_close()


@pytest.mark.django_db(transaction=True)
def test_a_backlog_is_sent_batch_after_batch_without_waiting_for_the_poll(
    alice, alice_api, receiver, monkeypatch
):
    monkeypatch.setattr(worker_module, "BATCH", 5)
    endpoint_of(alice_api, receiver.url)
    for index in range(23):
        raise_one(alice, f"bot-{index}")
    worker = Worker(threads=1, poll_seconds=30)
    runner = threading.Thread(target=worker.run)
    started = time.monotonic()
    runner.start()
    while len(receiver.received) < 23 and time.monotonic() - started < 10:
        time.sleep(0.02)
    took = time.monotonic() - started
    worker.stop()
    runner.join(10)
    assert not runner.is_alive()
    assert len(receiver.received) == 23
    assert took < 10, took


def _drain_queries(account, count: int) -> list[str]:
    for number in range(count):
        raise_one(account, f"bot{number}")
    with CaptureQueriesContext(connection) as captured:
        assert deliver_due() == count
    return [query["sql"] for query in captured.captured_queries]


def test_a_chunk_of_deliveries_costs_the_queries_of_one(alice, alice_api, receiver):
    """Deliveries are read, signed and recorded a chunk at a time: 25 delivered cost the same
    queries as 1 (a query each would be 24 more reads and 48 more writes)."""
    endpoint_of(alice_api, receiver.url)
    one = _drain_queries(alice, 1)
    WebhookDelivery.objects.all().delete()
    many = _drain_queries(alice, worker_module.CHUNK)
    assert len(many) == len(one)
    assert len(receiver.received) == 1 + worker_module.CHUNK
    assert WebhookAttempt.objects.filter(status=200).count() == worker_module.CHUNK
    assert set(WebhookDelivery.objects.values_list("state", "attempts")) == {("delivered", 1)}


def test_a_failure_in_a_chunk_is_recorded_before_the_next_attempt(alice, alice_api, receiver):
    """A 410 in the middle of a chunk disables the endpoint at once: nothing after it is sent."""
    endpoint_id = endpoint_of(alice_api, receiver.url)
    for number in range(5):
        raise_one(alice, f"bot{number}")
    receiver.answers = [(200, {}), (410, {})]
    assert deliver_due() == 2
    assert len(receiver.received) == 2
    assert WebhookEndpoint.objects.get(pk=endpoint_id).enabled is False
    states = list(WebhookDelivery.objects.order_by("sequence").values_list("state", "attempts"))
    assert states == [("delivered", 1), ("pending", 1)] + [("pending", 0)] * 3
