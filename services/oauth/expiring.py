"""`manage.py refresh_tokens`: the OAuth sets due within a window, found by their service row's
`refresh_by` in one query (no set opened), and refreshed one by one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from providers.identifiers import OAUTH
from services.audit import Actor
from services.exceptions import (
    OAuthClientMisconfigured,
    ProviderUnavailable,
    ReauthorizationRequired,
)
from services.models import ConnectedService, ServiceStatus
from services.oauth.refresh import refresh_service


@dataclass(frozen=True, slots=True)
class DueSet:
    account_id: int
    service: str
    generation: int


@dataclass(frozen=True, slots=True)
class Outcome:
    account_id: int
    service: str
    error: str = ""  # empty when refreshed, else the failure's code


def due_sets(*, ahead_seconds: float) -> list[DueSet]:
    """The connected OAuth sets that can be refreshed and expire within `ahead_seconds`."""
    until = timezone.now() + timedelta(seconds=ahead_seconds)
    rows = ConnectedService.objects.filter(
        key_type=OAUTH, status=ServiceStatus.CONNECTED, refresh_by__lte=until
    ).values_list("account_id", "service", "generation")
    return [DueSet(account_id, service, generation) for account_id, service, generation in rows]


def refresh_due_set(*, due: DueSet) -> Outcome:
    """Refresh one due set (as a use would, one refresh per service at a time)."""
    try:
        refresh_service(
            actor=Actor.command(due.account_id), service=due.service, generation=due.generation
        )
    except (ReauthorizationRequired, OAuthClientMisconfigured, ProviderUnavailable) as failed:
        return Outcome(due.account_id, due.service, str(failed.default_code))
    return Outcome(due.account_id, due.service)
