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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from providers.http.client import open_answer
from providers.http.failures import OutboundError
from services.exceptions import InvalidWebhookUrl
from services.masking import Secret
from services.models import DeliveryState, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from services.webhooks.destinations import destination_of, target_of
from services.webhooks.signing import headers

# Seconds before each retry: the first attempt is at once.
RETRY_DELAYS = (5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
JITTER = 0.2
ATTEMPT_TIMEOUT = 10.0
MAX_ANSWER = 64 * 1024
FAILING_DAYS = 5
MAX_RETRY_AFTER = 24 * 3600


@dataclass(frozen=True, slots=True)
class Due:
    """A pending delivery as it is sent: its row, its attempts so far, its event's id and the
    request body."""

    pk: int
    attempts: int
    event_id: str
    body: bytes


@dataclass(frozen=True, slots=True)
class Result:
    """What one attempt got: when it was made, the answer's status (None without one), the
    failure's kind, the seconds a Retry-After asked for, and how long it took."""

    attempted_at: datetime
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


def send_attempt(endpoint: WebhookEndpoint, signing: Sequence[Secret], due: Due) -> Result:
    """POST the delivery's event to its endpoint once, signed with the secrets in `signing`."""
    now = timezone.now()
    signed = headers(signing, event_id=due.event_id, timestamp=int(now.timestamp()), body=due.body)
    started = time.monotonic()
    status, error, retry_after = None, "", None
    try:
        answer = open_answer(
            destination=destination_of(endpoint.url),
            method="POST",
            target=target_of(endpoint.url),
            headers=signed,
            body=due.body,
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
    return Result(now, status, error, retry_after, duration_ms)


def record_results(endpoint: WebhookEndpoint, sent: Sequence[tuple[Due, Result]]) -> None:
    """The attempts' log entries, their deliveries' next states and the endpoint's health, in
    one transaction (the delivered ones in one UPDATE a status); `endpoint` follows in memory.
    """
    if not sent:
        return
    failing_since, disabled_reason = endpoint.failing_since, ""
    log: list[WebhookAttempt] = []
    delivered: dict[int | None, list[int]] = {}
    retried: list[tuple[int, dict[str, object]]] = []
    for due, result in sent:
        next_at = None
        if result.delivered:
            delivered.setdefault(result.status, []).append(due.pk)
            failing_since = None
        else:
            delay = next_delay(due.attempts + 1, result)
            if delay is not None:
                next_at = result.attempted_at + timedelta(seconds=delay)
            failing_since = failing_since or result.attempted_at
            if result.status == 410:
                disabled_reason = "The endpoint answered 410 Gone."
            elif result.attempted_at - failing_since >= timedelta(days=FAILING_DAYS):
                disabled_reason = "The endpoint failed for 5 days."
            retried.append(
                (
                    due.pk,
                    {
                        "state": DeliveryState.FAILED if delay is None else DeliveryState.PENDING,
                        "attempts": due.attempts + 1,
                        "next_attempt_at": next_at,
                        "last_status": result.status,
                        "last_error": result.error,
                    },
                )
            )
        log.append(
            WebhookAttempt(
                delivery_id=due.pk,
                endpoint_id=endpoint.id,
                attempted_at=result.attempted_at,
                status=result.status,
                error=result.error,
                duration_ms=result.duration_ms,
                next_attempt_at=next_at,
            )
        )
    changed: dict[str, object] = {}
    if failing_since != endpoint.failing_since:
        changed["failing_since"] = failing_since
    if disabled_reason:
        changed.update(enabled=False, disabled_reason=disabled_reason)
    now = timezone.now()
    with transaction.atomic():
        WebhookAttempt.objects.bulk_create(log)
        for status, pks in delivered.items():
            WebhookDelivery.objects.filter(pk__in=pks).update(
                state=DeliveryState.DELIVERED,
                attempts=F("attempts") + 1,
                next_attempt_at=None,
                last_status=status,
                last_error="",
                delivered_at=now,
            )
        for pk, fields in retried:
            WebhookDelivery.objects.filter(pk=pk).update(**fields)
        if changed:
            WebhookEndpoint.objects.filter(pk=endpoint.id).update(**changed)
    for name, value in changed.items():
        setattr(endpoint, name, value)
