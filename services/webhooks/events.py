"""The outbox: `raise_event`, the one way an event comes to be.

An event is one `WebhookEvent` row written inside the transaction of the change that causes
it: a change that rolls back leaves no event, and a committed one is published (its sequence,
a delivery to each endpoint that takes it then) and delivered by a worker however often
workers die (services/webhooks/publishing.py). An account without an enabled endpoint that
takes its type writes nothing (one query).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from services.models import new_event_id
from services.storage import queries
from services.times import rfc3339

CONNECTION_CREATED = "connection.created"
CONNECTION_REPLACED = "connection.replaced"
CONNECTION_REMOVED = "connection.removed"
CONNECTION_VERIFIED = "connection.verified"
CONNECTION_VERIFICATION_FAILED = "connection.verification_failed"
OAUTH_REFRESH_FAILED = "oauth.refresh_failed"
OAUTH_REAUTHORIZATION_REQUIRED = "oauth.reauthorization_required"
OAUTH_RECOVERED = "oauth.recovered"
CREDENTIAL_EXPIRING = "credential.expiring"
AGENT_TOKEN_CREATED = "agent.token_created"  # noqa: S105 - an event type
AGENT_TOKEN_REVOKED = "agent.token_revoked"  # noqa: S105 - an event type
AGENT_DELETED = "agent.deleted"
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_DECIDED = "approval.decided"
ACCESS_REQUEST_CREATED = "access_request.created"
ACCESS_REQUEST_DECIDED = "access_request.decided"
WEBHOOK_TEST = "webhook.test"

EVENT_TYPES: tuple[str, ...] = (
    CONNECTION_CREATED,
    CONNECTION_REPLACED,
    CONNECTION_REMOVED,
    CONNECTION_VERIFIED,
    CONNECTION_VERIFICATION_FAILED,
    OAUTH_REFRESH_FAILED,
    OAUTH_REAUTHORIZATION_REQUIRED,
    OAUTH_RECOVERED,
    CREDENTIAL_EXPIRING,
    AGENT_TOKEN_CREATED,
    AGENT_TOKEN_REVOKED,
    AGENT_DELETED,
    APPROVAL_REQUESTED,
    APPROVAL_DECIDED,
    ACCESS_REQUEST_CREATED,
    ACCESS_REQUEST_DECIDED,
    WEBHOOK_TEST,
)


def takes(events: list[str], type: str) -> bool:
    """Whether an endpoint subscribed to `events` (empty: every type) takes `type`.
    `webhook.test` goes only to the endpoint it is sent to (its `data.webhookId`), never by
    subscription."""
    return type != WEBHOOK_TEST and (not events or type in events)


@dataclass(frozen=True, slots=True)
class Raised:
    """A test event written: its id and type."""

    id: str
    type: str


def raise_event(*, account_id: int, type: str, data: dict[str, object]) -> str | None:
    """Write an event of the account for every enabled endpoint that takes `type`, inside
    the caller's transaction (or one of its own): its id; None when no endpoint takes it.

    `data` holds service identifiers, agent names, statuses, ids and times, never a value, a
    token or a digest; its delivery adds the account's `sequence` and `occurredAt`.
    """
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    with transaction.atomic(savepoint=False), queries.outbox() as outbox:
        subscribed = outbox.subscriptions(account_id=account_id)
        if not any(takes(events, type) for _, events in subscribed):
            return None
        return _write(outbox, account_id=account_id, type=type, data=data)


def raise_test_event(*, account_id: int, endpoint_id: str) -> Raised:
    """A `webhook.test` event for one endpoint, whether or not it is enabled."""
    with transaction.atomic(savepoint=False), queries.outbox() as outbox:
        data: dict[str, object] = {"webhookId": endpoint_id}
        event_id = _write(outbox, account_id=account_id, type=WEBHOOK_TEST, data=data)
    return Raised(event_id, WEBHOOK_TEST)


def _write(outbox: queries.Outbox, *, account_id: int, type: str, data: dict[str, object]) -> str:
    event_id = new_event_id()
    outbox.write(
        event_id=event_id, account_id=account_id, type=type, data=data, occurred_at=timezone.now()
    )
    return event_id


def iso(moment: datetime | None) -> str | None:
    """A moment as the events' data writes it."""
    return rfc3339(moment) if moment is not None else None
