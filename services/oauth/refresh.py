"""Refreshing an OAuth set: one refresh per service at a time, across workers and hosts. The
claim, the pause after an unavailable token URL and the 401's minute are all on the service
row, so every worker and host sees them (docs/oauth.md)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TypeGuard

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from providers import catalog
from providers import oauth as provider_oauth
from providers.identifiers import OAUTH
from services import audit
from services.audit import Actor, Operation
from services.exceptions import (
    OAuthClientMisconfigured,
    ProviderUnavailable,
    ReauthorizationRequired,
)
from services.masking import Secret
from services.models import ConnectedService, ServiceStatus
from services.oauth.clients import client_of
from services.oauth.token_sets import token_set
from services.sealed import OpenedSet, open_set, seal_set
from services.set_expiry import refresh_by_of
from services.storage import queries
from services.storage.connections import give_back_connections
from services.storage.transactions import account_transaction
from services.webhooks import events

# How long a claimed refresh holds before another worker may take it over: the token URL's
# bound and a margin.
CLAIM_MARGIN_SECONDS = 5.0
WAIT_STEP_SECONDS = 0.05
# A refresh asked for by a 401 runs at most once in this many seconds per service: a path that
# answers 401 whatever the token must not make every call spend a refresh.
FORCED_REFRESH_SECONDS = 60


def refresh_service(
    *, actor: Actor, service: str, generation: int, after_401: bool = False
) -> None:
    """Move the service past `generation` with a refreshed set: by refreshing it here, or by
    waiting for the worker that does. `after_401`: the provider refused the set's access
    token; unless such a refresh of the service ran within FORCED_REFRESH_SECONDS, it runs
    (else nothing changes, and the set stays as it is). Raises ReauthorizationRequired,
    OAuthClientMisconfigured or ProviderUnavailable (at once while the service's refreshes
    pause after an unavailable token URL)."""
    timeout = settings.CREDVAULT_OAUTH_TIMEOUT
    gives_up = time.monotonic() + timeout + 2 * CLAIM_MARGIN_SECONDS
    while True:
        row = (
            ConnectedService.objects.filter(account_id=actor.account_id, service=service)
            .values(
                "id",
                "generation",
                "status",
                "oauth_provider",
                "refreshing_until",
                "refresh_paused_until",
                "forced_refresh_at",
            )
            .first()
        )
        if row is None:
            raise ReauthorizationRequired()
        if row["generation"] != generation:
            return  # another worker stored the next generation: use it
        if row["status"] == ServiceStatus.REAUTHORIZATION_REQUIRED:
            raise ReauthorizationRequired()
        now = timezone.now()
        if _later(row["refresh_paused_until"], now):
            raise _paused(row["refresh_paused_until"], now)
        if (
            after_401
            and _later(row["forced_refresh_at"], now - timedelta(seconds=FORCED_REFRESH_SECONDS))
            and not _later(row["refreshing_until"], now)
        ):
            return  # a 401 refreshed this service within the minute, and none runs now
        if _claim(
            row["id"], generation, seconds=timeout + CLAIM_MARGIN_SECONDS, after_401=after_401
        ):
            _refresh_claimed(
                actor=actor,
                service=service,
                provider=_provider_of(row["oauth_provider"] or service),
                service_id=row["id"],
                generation=generation,
            )
            return
        # The wait for another worker's refresh holds no database connection.
        give_back_connections()
        if time.monotonic() > gives_up:
            raise ProviderUnavailable()
        time.sleep(WAIT_STEP_SECONDS)


def _later(moment: datetime | None, than: datetime) -> TypeGuard[datetime]:
    return moment is not None and moment > than


def _paused(until: datetime, now: datetime) -> ProviderUnavailable:
    wait = max(1, math.ceil((until - now).total_seconds()))
    return ProviderUnavailable(
        "The provider's token URL could not be reached a moment ago; credvault tries again "
        f"after {wait} seconds. Nothing was changed.",
        headers={"Retry-After": str(wait)},
    )


def _claim(service_id: int, generation: int, *, seconds: float, after_401: bool) -> bool:
    """Take the service's refresh: only where it is still at `generation`, connected (a
    refusal read by nobody yet still counts), not paused, and no other worker's claim holds;
    for a refresh a 401 asks for, only where none was asked within FORCED_REFRESH_SECONDS. One
    UPDATE, so two workers never both win."""
    now = timezone.now()
    claimed = (
        ConnectedService.objects.filter(
            pk=service_id, generation=generation, status=ServiceStatus.CONNECTED
        )
        .filter(Q(refreshing_until__isnull=True) | Q(refreshing_until__lt=now))
        .filter(Q(refresh_paused_until__isnull=True) | Q(refresh_paused_until__lte=now))
    )
    changes = {"refreshing_until": now + timedelta(seconds=seconds)}
    if after_401:
        since = now - timedelta(seconds=FORCED_REFRESH_SECONDS)
        claimed = claimed.filter(
            Q(forced_refresh_at__isnull=True) | Q(forced_refresh_at__lte=since)
        )
        changes["forced_refresh_at"] = now
    with transaction.atomic():
        return bool(claimed.update(**changes))


def _pause(service_id: int) -> None:
    """The token URL was unavailable: no refresh of the service before the pause ends."""
    until = timezone.now() + timedelta(seconds=settings.CREDVAULT_REFRESH_RETRY_SECONDS)
    ConnectedService.objects.filter(pk=service_id).update(
        refreshing_until=None, refresh_paused_until=until
    )


def _release(service_id: int, generation: int) -> None:
    ConnectedService.objects.filter(pk=service_id, generation=generation).update(
        refreshing_until=None
    )


def _refresh_claimed(
    *,
    actor: Actor,
    service: str,
    provider: catalog.Provider | None,
    service_id: int,
    generation: int,
) -> None:
    """The claim is ours: read the set, ask the token URL, store the answer."""
    try:
        _refresh_and_store(
            actor=actor,
            service=service,
            provider=provider,
            service_id=service_id,
            generation=generation,
        )
    except BaseException:
        _release(service_id, generation)
        raise


def _refresh_and_store(
    *,
    actor: Actor,
    service: str,
    provider: catalog.Provider | None,
    service_id: int,
    generation: int,
) -> None:
    stored = stored_set(actor.account_id, service, service_id, generation).by_name
    refresh_token = stored.get("refresh_token")
    client = client_of(account_id=actor.account_id, provider=provider.id) if provider else None
    if client is None and "client_id" in stored and "client_secret" in stored:
        client = provider_oauth.Client(
            stored["client_id"].reveal(), stored["client_secret"].reveal()
        )
    if provider is None or refresh_token is None or client is None:
        _mark_reauthorization(actor, service, service_id, generation, why="no_client")
        raise ReauthorizationRequired()
    try:
        answer = provider_oauth.refresh(
            provider, client=client, refresh_token=refresh_token.reveal()
        )
    except provider_oauth.Unavailable:
        with transaction.atomic():
            _pause(service_id)
            audit.record(
                actor, Operation.REFRESH, status=503, service=service, target="unavailable"
            )
            _raise_refresh_failed(actor, service, "unavailable")
        raise ProviderUnavailable() from None
    except provider_oauth.Misconfigured as exc:
        # The client, not the person's grant: the status stays, so that the connection
        # works again as soon as the client is corrected.
        with transaction.atomic():
            audit.record(actor, Operation.REFRESH, status=409, service=service, target=exc.code)
            _raise_refresh_failed(actor, service, exc.code)
        raise OAuthClientMisconfigured() from None
    except provider_oauth.Refused as exc:
        _mark_reauthorization(actor, service, service_id, generation, why=exc.code or "refused")
        raise ReauthorizationRequired() from None
    fields = token_set(
        answer, previous_refresh=refresh_token, scopes=_scopes(stored), provider=provider
    )
    # A refresh answer without an acceptable API host keeps the stored one: the new tokens
    # are stored all the same, so that a rotated refresh token is never lost.
    taken = set(fields.names)
    fields = fields.plus(
        (name, stored[name])
        for name in ("client_id", "client_secret", "id_token", _host_field(provider))
        if name in stored and name not in taken
    )
    _store_generation(actor, service, service_id, generation, fields)


def _scopes(stored: Mapping[str, Secret]) -> tuple[str, ...]:
    return tuple(stored["scope"].reveal().split()) if "scope" in stored else ()


def _host_field(provider: catalog.Provider) -> str:
    return provider.api_host.field if provider.api_host is not None else ""


def _provider_of(provider_id: str) -> catalog.Provider | None:
    provider = catalog.get(provider_id)
    return provider if provider is not None and provider.oauth is not None else None


def stored_set(account_id: int, service: str, service_id: int, generation: int) -> OpenedSet:
    """The set stored at `generation` of the service row `service_id`, opened."""
    rows = ConnectedService.objects.get(pk=service_id).fields.all()
    return open_set(account_id=account_id, service=service, generation=generation, fields=rows)


def _store_generation(
    actor: Actor,
    service: str,
    service_id: int,
    generation: int,
    fields: OpenedSet,
) -> None:
    """The refreshed set as the next generation, in one transaction with its audit event;
    nothing when another store moved the service meanwhile."""
    with transaction.atomic():
        locked = queries.lock_service(account_id=actor.account_id, service=service)
        if locked is None or locked.id != service_id or locked.generation != generation:
            return
        queries.replace_fields(
            service_id=service_id,
            generation=generation + 1,
            key_type=OAUTH,
            connected_at=timezone.now(),
            refresh_by=refresh_by_of(fields.by_name),
            fields=seal_set(
                account_id=actor.account_id,
                service=service,
                generation=generation + 1,
                fields=fields,
            ),
        )
        audit.record(actor, Operation.REFRESH, service=service)
        # A refresh that failed before (its pause is set) and works now: recovered.
        if ConnectedService.objects.filter(
            pk=service_id, refresh_paused_until__isnull=False
        ).update(refresh_paused_until=None):
            events.raise_event(
                account_id=actor.account_id, type=events.OAUTH_RECOVERED, data={"service": service}
            )


def _raise_refresh_failed(actor: Actor, service: str, reason: str) -> None:
    events.raise_event(
        account_id=actor.account_id,
        type=events.OAUTH_REFRESH_FAILED,
        data={"service": service, "reason": reason},
    )


def _mark_reauthorization(
    actor: Actor, service: str, service_id: int, generation: int, *, why: str
) -> None:
    with account_transaction(actor.account_id):
        ConnectedService.objects.filter(pk=service_id, generation=generation).update(
            status=ServiceStatus.REAUTHORIZATION_REQUIRED, refreshing_until=None
        )
        audit.record(actor, Operation.REFRESH, status=409, service=service, target=why[:64])
        events.raise_event(
            account_id=actor.account_id,
            type=events.OAUTH_REAUTHORIZATION_REQUIRED,
            data={"service": service, "reason": why[:64]},
        )
