"""`manage.py refresh_tokens`: refresh every OAuth set that expires within a window."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from providers.identifiers import OAUTH
from services.audit import Actor
from services.exceptions import (
    OAuthClientMisconfigured,
    ProviderUnavailable,
    ReauthorizationRequired,
)
from services.models import ConnectedService, ServiceStatus
from services.oauth.refresh import refresh_service, stored_set
from services.oauth.token_sets import refresh_due


@dataclass(frozen=True)
class Outcome:
    account_id: int
    service: str
    error: str = ""


def refresh_expiring(*, ahead_seconds: float) -> Iterator[int | Outcome]:
    """Refresh every OAuth set that expires within `ahead_seconds`: first the number of sets
    due, then one Outcome per set tried, as it is done."""
    rows = ConnectedService.objects.filter(
        key_type=OAUTH, status=ServiceStatus.CONNECTED
    ).values_list("id", "account_id", "service", "generation")
    candidates = []
    for service_id, account_id, service, generation in rows:
        fields = stored_set(account_id, service, service_id, generation).by_name
        if refresh_due(fields, ahead=ahead_seconds):
            candidates.append((account_id, service, generation))
    yield len(candidates)
    for account_id, service, generation in candidates:
        actor = Actor.command(account_id)
        try:
            refresh_service(actor=actor, service=service, generation=generation)
        except ReauthorizationRequired:
            yield Outcome(account_id, service, "reauthorization_required")
        except OAuthClientMisconfigured:
            yield Outcome(account_id, service, "oauth_client_misconfigured")
        except ProviderUnavailable:
            yield Outcome(account_id, service, "provider_unavailable")
        else:
            yield Outcome(account_id, service)
