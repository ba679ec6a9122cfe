"""One delivery attempt and what follows from its answer.

The schedule: at once, then about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after each
failure (each delay with up to 20 % jitter either way), or the `Retry-After` of a 429 or 503
answer (1 s to 24 h); after the eighth failure the delivery has failed. A 2xx delivers it. A
410 disables the endpoint, and so does failing for 5 days on end; the deliveries of a disabled
endpoint wait, pending, until it is enabled again. An attempt waits at most 10 s for its answer
and reads at most 64 KiB of it; its log keeps the status or the failure's kind, never a body.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from django.db import transaction
from django.utils import timezone

from providers.http.client import open_answer
from providers.http.failures import OutboundError
from services.exceptions import InvalidWebhookUrl
from services.models import DeliveryState, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from services.webhooks.destinations import destination_of, target_of
from services.webhooks.endpoints import signing_secrets
from services.webhooks.signing import body_of, headers

# Seconds before each retry: the first attempt is at once.
RETRY_DELAYS = (5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
JITTER = 0.2
ATTEMPT_TIMEOUT = 10.0
MAX_ANSWER = 64 * 1024
FAILING_DAYS = 5
MAX_RETRY_AFTER = 24 * 3600


@dataclass(frozen=True, slots=True)
class Result:
    """What one attempt got: the answer's status (None without one), the failure's kind, the
    seconds a Retry-After asked for, and how long it took."""

    status: int | None
    error: str
    retry_after: float | None
    duration_ms: int

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def retry_after_seconds(value: str | None, *, now: datetime) -> float | None:
    """A Retry-After header (seconds or an HTTP date) as seconds from now, kept to 1 s to
    24 h; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            seconds = (parsedate_to_datetime(value) - now).total_seconds()
        except (TypeError, ValueError, OverflowError):
            return None
    return min(max(seconds, 1.0), MAX_RETRY_AFTER)


def next_delay(attempts: int, result: Result) -> float | None:
    """Seconds until the next attempt after `attempts` failed ones; None when none is left."""
    if attempts >= MAX_ATTEMPTS:
        return None
    if result.status in (429, 503) and result.retry_after is not None:
        return result.retry_after
    delay = RETRY_DELAYS[attempts - 1]
    return delay * random.uniform(1 - JITTER, 1 + JITTER)  # noqa: S311 - jitter, not a secret


def send_attempt(delivery: WebhookDelivery) -> Result:
    """POST the delivery's event to its endpoint once, signed with the secrets in use."""
    endpoint, event = delivery.endpoint, delivery.event
    now = timezone.now()
    body = body_of(event)
    signed = headers(
        signing_secrets(endpoint, now=now),
        event_id=event.id,
        timestamp=int(now.timestamp()),
        body=body,
    )
    started = time.monotonic()
    status, error, retry_after = None, "", None
    try:
        answer = open_answer(
            destination=destination_of(endpoint.url),
            method="POST",
            target=target_of(endpoint.url),
            headers=signed,
            body=body,
            timeout=ATTEMPT_TIMEOUT,
            max_duration=ATTEMPT_TIMEOUT,
            max_answer=MAX_ANSWER,
            pool_key=("webhook", endpoint.id),
        )
        status = answer.status
        retry_after = retry_after_seconds(
            next((v for k, v in answer.headers if k.lower() == "retry-after"), None), now=now
        )
        try:
            answer.read_all()
        except OutboundError:
            pass  # the status decides; an answer too long or too slow after it is not read
        finally:
            answer.close()
    except OutboundError as failed:
        error = failed.kind.value
    except InvalidWebhookUrl:
        error = "invalid_url"
    duration_ms = int((time.monotonic() - started) * 1000)
    return Result(status, error, retry_after, duration_ms)


def record_result(delivery: WebhookDelivery, result: Result) -> None:
    """The attempt's log entry, the delivery's next state and the endpoint's health, in one
    transaction."""
    now = timezone.now()
    attempts = delivery.attempts + 1
    endpoint = delivery.endpoint
    changed: dict[str, object] = {}
    state, next_at = DeliveryState.PENDING, None
    if result.delivered:
        state = DeliveryState.DELIVERED
        if endpoint.failing_since is not None:
            changed["failing_since"] = None
    else:
        delay = next_delay(attempts, result)
        if delay is None:
            state = DeliveryState.FAILED
        else:
            next_at = now + timedelta(seconds=delay)
        failing_since = endpoint.failing_since or now
        if endpoint.failing_since is None:
            changed["failing_since"] = now
        if result.status == 410:
            changed.update(enabled=False, disabled_reason="The endpoint answered 410 Gone.")
        elif now - failing_since >= timedelta(days=FAILING_DAYS):
            changed.update(enabled=False, disabled_reason="The endpoint failed for 5 days.")
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery,
            endpoint_id=endpoint.id,
            attempted_at=now,
            status=result.status,
            error=result.error,
            duration_ms=result.duration_ms,
            next_attempt_at=next_at,
        )
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            state=state,
            attempts=attempts,
            next_attempt_at=next_at,
            last_status=result.status,
            last_error=result.error,
            delivered_at=now if state == DeliveryState.DELIVERED else None,
        )
        if changed:
            WebhookEndpoint.objects.filter(pk=endpoint.id).update(**changed)
