"""An account's webhook endpoints: create, list, change, delete, rotate the secret, send a
test, read the deliveries log, redeliver an event. Each change is one transaction with its
audit event; the plaintext of a secret exists once, in what `create_endpoint` and
`rotate_secret` return."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from services import audit
from services.audit import Actor, Operation
from services.exceptions import (
    UnknownEventType,
    WebhookEventNotFound,
    WebhookLimitReached,
    WebhookNotFound,
)
from services.keys import envelope
from services.masking import Secret
from services.models import (
    DeliveryState,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
    WebhookSecret,
)
from services.sealed import webhook_secret_place
from services.storage.transactions import account_transaction
from services.webhooks import events as event_types
from services.webhooks.destinations import checked_url
from services.webhooks.publishing import endpoints_of, targets_of
from services.webhooks.signing import new_secret

MAX_ENDPOINTS_PER_ACCOUNT = 10
# How long the previous secret still signs after a rotation.
ROTATION_OVERLAP = timedelta(hours=24)
MAX_LOG_LIMIT = 200


@dataclass(frozen=True, slots=True)
class WithSecret:
    """An endpoint and the plaintext of its new secret, shown once."""

    endpoint: WebhookEndpoint
    secret: str
    created_at: datetime

    def __repr__(self) -> str:
        return f"WithSecret(endpoint={self.endpoint.id!r})"


def checked_events(events: Sequence[str]) -> list[str]:
    """The event types an endpoint takes, each a known one (UnknownEventType), without
    repeats; empty means every type."""
    for type_ in events:
        if type_ not in event_types.EVENT_TYPES:
            raise UnknownEventType(type_)
    return list(dict.fromkeys(events))


def _seal(endpoint: WebhookEndpoint, plaintext: str, now: datetime) -> None:
    place = webhook_secret_place(account_id=endpoint.account_id, endpoint_id=endpoint.id)
    key_id, ciphertext = envelope.seal(Secret(plaintext), place)
    WebhookSecret.objects.create(
        endpoint=endpoint, key_id=key_id, ciphertext=ciphertext, created_at=now
    )


def signing_secrets(endpoint: WebhookEndpoint, *, now: datetime) -> list[Secret]:
    """The secrets that sign a delivery now: the current one, then the previous one while
    its 24 hours last."""
    place = webhook_secret_place(account_id=endpoint.account_id, endpoint_id=endpoint.id)
    rows = WebhookSecret.objects.filter(endpoint=endpoint).order_by("-created_at", "-pk")
    return [
        envelope.open(
            row.key_id,
            bytes(row.ciphertext),
            place,
            field_id=row.pk,
            table=WebhookSecret._meta.db_table,
        )
        for row in rows
        if row.expires_at is None or row.expires_at > now
    ]


def create_endpoint(
    *, actor: Actor, url: str, events: Sequence[str] = (), description: str = ""
) -> WithSecret:
    """A new enabled endpoint with a new secret, or WebhookLimitReached (10 an account)."""
    url = checked_url(url)
    types = checked_events(events)
    now = timezone.now()
    with account_transaction(actor.account_id):
        count = WebhookEndpoint.objects.filter(account_id=actor.account_id).count()
        if count >= MAX_ENDPOINTS_PER_ACCOUNT:
            raise WebhookLimitReached()
        endpoint = WebhookEndpoint.objects.create(
            account_id=actor.account_id,
            url=url,
            events=types,
            description=description,
            created_at=now,
            updated_at=now,
        )
        secret = new_secret()
        _seal(endpoint, secret, now)
        audit.record(actor, Operation.CREATE_WEBHOOK, target=endpoint.id)
    return WithSecret(endpoint, secret, now)


def list_endpoints(*, actor: Actor) -> list[WebhookEndpoint]:
    """The account's endpoints, oldest first."""
    return list(
        WebhookEndpoint.objects.filter(account_id=actor.account_id).order_by("created_at", "pk")
    )


def get_endpoint(*, actor: Actor, endpoint_id: str) -> WebhookEndpoint:
    """The account's endpoint `endpoint_id`, or WebhookNotFound (another account's too)."""
    endpoint = WebhookEndpoint.objects.filter(account_id=actor.account_id, pk=endpoint_id).first()
    if endpoint is None:
        raise WebhookNotFound()
    return endpoint


def update_endpoint(
    *,
    actor: Actor,
    endpoint_id: str,
    url: str | None = None,
    events: Sequence[str] | None = None,
    description: str | None = None,
    enabled: bool | None = None,
) -> WebhookEndpoint:
    """Change what is given (None: unchanged). Enabling clears the reason it was disabled and
    its days of failure, so that its pending deliveries resume."""
    if url is not None:
        url = checked_url(url)
    types = checked_events(events) if events is not None else None
    with account_transaction(actor.account_id):
        endpoint = get_endpoint(actor=actor, endpoint_id=endpoint_id)
        if url is not None:
            endpoint.url = url
        if types is not None:
            endpoint.events = types
        if description is not None:
            endpoint.description = description
        if enabled is True and not endpoint.enabled:
            endpoint.enabled, endpoint.disabled_reason, endpoint.failing_since = True, "", None
            WebhookDelivery.objects.filter(endpoint=endpoint, state=DeliveryState.PENDING).update(
                next_attempt_at=timezone.now()
            )
        elif enabled is False:
            endpoint.enabled, endpoint.disabled_reason = False, "disabled by the account"
        endpoint.updated_at = timezone.now()
        endpoint.save()
        audit.record(actor, Operation.UPDATE_WEBHOOK, target=endpoint.id)
    return endpoint


def delete_endpoint(*, actor: Actor, endpoint_id: str) -> None:
    """Delete the endpoint, its secrets and its deliveries."""
    with account_transaction(actor.account_id):
        deleted, _ = WebhookEndpoint.objects.filter(
            account_id=actor.account_id, pk=endpoint_id
        ).delete()
        if not deleted:
            raise WebhookNotFound()
        audit.record(actor, Operation.DELETE_WEBHOOK, target=endpoint_id)


def rotate_secret(*, actor: Actor, endpoint_id: str) -> WithSecret:
    """A new current secret; the one it replaces signs too for 24 hours, and any older one
    is deleted."""
    now = timezone.now()
    with account_transaction(actor.account_id):
        endpoint = get_endpoint(actor=actor, endpoint_id=endpoint_id)
        rows = WebhookSecret.objects.filter(endpoint=endpoint)
        rows.exclude(expires_at__isnull=True).delete()
        rows.filter(expires_at__isnull=True).update(expires_at=now + ROTATION_OVERLAP)
        secret = new_secret()
        _seal(endpoint, secret, now)
        audit.record(actor, Operation.ROTATE_WEBHOOK_SECRET, target=endpoint.id)
    return WithSecret(endpoint, secret, now)


def send_test(*, actor: Actor, endpoint_id: str) -> event_types.Raised:
    """A `webhook.test` event for this endpoint alone."""
    with transaction.atomic():
        endpoint = get_endpoint(actor=actor, endpoint_id=endpoint_id)
        return event_types.raise_test_event(account_id=actor.account_id, endpoint_id=endpoint.id)


def attempts_page(
    *, actor: Actor, endpoint_id: str, limit: int = 50, before: int | None = None
) -> tuple[list[WebhookAttempt], str | None]:
    """The endpoint's attempts, newest first: at most `limit` (1 to 200), those older than
    the attempt `before` when given; and the cursor of the next page (None on the last)."""
    endpoint = get_endpoint(actor=actor, endpoint_id=endpoint_id)
    rows = WebhookAttempt.objects.filter(endpoint=endpoint).select_related("delivery__event")
    if before is not None:
        rows = rows.filter(pk__lt=before)
    limit = max(1, min(limit, MAX_LOG_LIMIT))
    found = list(rows.order_by("-pk")[: limit + 1])
    more = len(found) > limit
    return found[:limit], str(found[limit - 1].pk) if more else None


def redeliver(*, actor: Actor, event_id: str) -> int:
    """Send the event again to each endpoint it was for, at once, with a new schedule: how
    many deliveries were queued. WebhookEventNotFound for another account's or no event."""
    with transaction.atomic():
        deliveries = WebhookDelivery.objects.filter(
            event_id=event_id, event__account_id=actor.account_id
        )
        queued = deliveries.update(
            state=DeliveryState.PENDING, attempts=0, next_attempt_at=timezone.now()
        )
        if not queued:  # not published yet: it goes to its endpoints anyway
            unpublished = WebhookEvent.objects.filter(
                pk=event_id, account_id=actor.account_id, sequence__isnull=True
            ).first()
            if unpublished is not None:
                endpoints = endpoints_of([actor.account_id]).get(actor.account_id, [])
                queued = len(targets_of(unpublished, endpoints))
    if not queued:
        raise WebhookEventNotFound()
    return queued
