"""When a stored set expires and is due for a refresh, read from its `expires_at` field: the
business rules of any set (a store by hand included) and OAuth's refresh read it alike."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from services.masking import Secret


def expiry_of(fields: Mapping[str, Secret]) -> datetime | None:
    """A set's `expires_at`: RFC 3339 (as credvault stores it) or seconds since the epoch (as
    some imported sets hold it); None when absent or unreadable."""
    value = fields.get("expires_at")
    if value is None:
        return None
    text = value.reveal().strip()
    try:
        if text.isdigit():
            return datetime.fromtimestamp(int(text), tz=UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def refresh_by_of(fields: Mapping[str, Secret]) -> datetime | None:
    """When a set is to be refreshed by: its expiry, where it holds a refresh token; None
    when it is never refreshed ahead. The service row keeps it (`refresh_by`)."""
    return expiry_of(fields) if "refresh_token" in fields else None


def refresh_due(fields: Mapping[str, Secret], *, ahead: float) -> bool:
    """Whether a set can be refreshed and expires within `ahead` seconds."""
    refresh_by = refresh_by_of(fields)
    return refresh_by is not None and refresh_by <= timezone.now() + timedelta(seconds=ahead)
