"""`credential.expiring`: 7 days and 1 day before a known expiry, once each.

The expiry known without opening a set is its service row's `refresh_by` (services/set_expiry.py:
the `expires_at` of a set that holds a refresh token). The worker scans now and then; an event
already raised for the service's generation and window is not raised again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from services.models import ConnectedService, WebhookEvent
from services.webhooks import events

WINDOWS = {"7d": timedelta(days=7), "1d": timedelta(days=1)}


def raise_expiring(*, now: datetime | None = None) -> int:
    """Raise each due `credential.expiring` not raised before: how many were raised."""
    now = now or timezone.now()
    raised = 0
    rows = ConnectedService.objects.filter(
        refresh_by__isnull=False, refresh_by__gt=now, refresh_by__lte=now + WINDOWS["7d"]
    ).values_list("account_id", "service", "generation", "refresh_by")
    for account_id, service, generation, expires_at in rows:
        if expires_at is None:
            continue
        window = "1d" if expires_at <= now + WINDOWS["1d"] else "7d"
        with transaction.atomic():
            if WebhookEvent.objects.filter(
                account_id=account_id,
                type=events.CREDENTIAL_EXPIRING,
                data__service=service,
                data__generation=generation,
                data__window=window,
            ).exists():
                continue
            data = {
                "service": service,
                "generation": generation,
                "window": window,
                "expiresAt": events.iso(expires_at),
            }
            if events.raise_event(
                account_id=account_id, type=events.CREDENTIAL_EXPIRING, data=data
            ):
                raised += 1
    return raised
