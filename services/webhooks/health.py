"""The delivery backlog, as `check_webhooks` prints it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Min
from django.utils import timezone

from services.models import DeliveryState, WebhookDelivery, WebhookEndpoint, WebhookEvent


@dataclass(frozen=True, slots=True)
class Backlog:
    unpublished: int
    pending: int
    due: int
    failed: int
    disabled_endpoints: int
    oldest_age_seconds: float


def backlog() -> Backlog:
    """Events not yet published, pending deliveries (and those due now), failed ones, disabled
    endpoints, and how long ago the oldest undelivered event occurred."""
    now = timezone.now()
    unpublished = WebhookEvent.objects.filter(sequence__isnull=True)
    pending = WebhookDelivery.objects.filter(state=DeliveryState.PENDING)
    oldest = min(
        (
            moment
            for moment in (
                unpublished.aggregate(oldest=Min("occurred_at"))["oldest"],
                pending.aggregate(oldest=Min("event__occurred_at"))["oldest"],
            )
            if moment is not None
        ),
        default=None,
    )
    return Backlog(
        unpublished=unpublished.count(),
        pending=pending.count(),
        due=pending.filter(next_attempt_at__lte=now).count(),
        failed=WebhookDelivery.objects.filter(state=DeliveryState.FAILED).count(),
        disabled_endpoints=WebhookEndpoint.objects.filter(enabled=False).count(),
        oldest_age_seconds=(now - oldest).total_seconds() if oldest else 0.0,
    )
