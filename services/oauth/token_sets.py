"""The credential set of a token answer (the fields docs/oauth.md names), and when a set
expires and is due for a refresh."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from providers import catalog
from providers import oauth as provider_oauth
from services.masking import Secret
from services.sealed import OpenedSet


def token_set(
    answer: provider_oauth.TokenAnswer,
    *,
    previous_refresh: Secret | None,
    scopes: tuple[str, ...],
    provider: catalog.Provider,
) -> OpenedSet:
    """The set of a token answer. Its API host (where the provider names one) is taken only
    when it matches the catalog's patterns: the callback refuses another one first, and a
    refresh keeps the stored one."""
    fields: list[tuple[str, Secret]] = [("access_token", Secret(answer.access_token))]
    api_host = provider.api_host
    if api_host is not None and answer.api_host and api_host.base_url(answer.api_host):
        fields.append((api_host.field, Secret(answer.api_host)))
    refresh_token = Secret(answer.refresh_token) if answer.refresh_token else previous_refresh
    if refresh_token is not None:
        fields.append(("refresh_token", refresh_token))
    if answer.expires_in is not None:
        expires_at = timezone.now() + timedelta(seconds=max(0, answer.expires_in))
        fields.append(("expires_at", Secret(expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"))))
    scope = answer.scope if answer.scope is not None else " ".join(scopes)
    if scope:
        fields.append(("scope", Secret(scope)))
    if answer.token_type:
        fields.append(("token_type", Secret(answer.token_type)))
    return OpenedSet(fields)


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
