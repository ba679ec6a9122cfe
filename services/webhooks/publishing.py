"""Publishing: a raised event gets its account's next `sequence` and a pending delivery, due
at once, to each endpoint of the account that takes it now.

Raising an event writes one row in its change's transaction (services/webhooks/events.py);
the worker publishes the committed ones, oldest first, before it looks for due deliveries.
Which endpoints an event goes to is decided here: the enabled ones that take its type (a
`webhook.test` goes to the endpoint it names, enabled or not). One worker publishes at a time
(an advisory lock on PostgreSQL; SQLite's writer is alone), so an account's sequences follow
the order its events are published in and never skip back.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from services.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from services.storage import queries
from services.webhooks.events import WEBHOOK_TEST, takes

# Events published in one transaction.
PUBLISH_BATCH = 500

# An endpoint as publishing reads it: (id, enabled, types it takes).
EndpointRow = tuple[str, bool, list[str]]


def targets_of(event: WebhookEvent, endpoints: Iterable[EndpointRow]) -> list[str]:
    """The endpoints, of the event's account's `endpoints`, that it goes to."""
    if event.type == WEBHOOK_TEST:
        named = event.data.get("webhookId")
        return [pk for pk, _, _ in endpoints if pk == named]
    return [pk for pk, enabled, types in endpoints if enabled and takes(types, event.type)]


def endpoints_of(account_ids: Iterable[int]) -> dict[int, list[EndpointRow]]:
    """The endpoints of each of these accounts (one query)."""
    by_account: dict[int, list[EndpointRow]] = {}
    rows = WebhookEndpoint.objects.filter(account_id__in=set(account_ids))
    for pk, account_id, enabled, types in rows.values_list("id", "account_id", "enabled", "events"):
        by_account.setdefault(account_id, []).append((pk, enabled, types))
    return by_account


def publish_events(*, limit: int = PUBLISH_BATCH) -> int:
    """Publish up to `limit` unpublished events in one transaction: how many (0 when another
    worker is publishing)."""
    with transaction.atomic():
        if not queries.try_publishing_lock():
            return 0
        events = list(
            WebhookEvent.objects.filter(sequence__isnull=True)
            .order_by("occurred_at", "id")
            .only("id", "account_id", "type", "data")[:limit]
        )
        if not events:
            return 0
        by_account: dict[int, list[WebhookEvent]] = {}
        for event in events:
            by_account.setdefault(event.account_id, []).append(event)
        deliveries = []
        now = timezone.now()
        endpoints = endpoints_of(by_account)
        for account_id, raised in by_account.items():
            numbers = queries.take_webhook_sequences(account_id=account_id, count=len(raised))
            for event, sequence in zip(raised, numbers, strict=True):
                event.sequence = sequence
                deliveries += [
                    WebhookDelivery(
                        event_id=event.id,
                        endpoint_id=target,
                        sequence=sequence,
                        next_attempt_at=now,
                        created_at=now,
                    )
                    for target in targets_of(event, endpoints.get(account_id, []))
                ]
        WebhookEvent.objects.bulk_update(events, ["sequence"])
        WebhookDelivery.objects.bulk_create(deliveries)
    return len(events)


def publish_all() -> int:
    """Publish every unpublished event, a batch at a time: how many."""
    published = 0
    while count := publish_events():
        published += count
        if count < PUBLISH_BATCH:
            break
    return published
