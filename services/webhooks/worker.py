"""The delivery worker: it publishes the raised events (services/webhooks/publishing.py),
then claims endpoints with due deliveries one at a time by a lease, and each claimed
endpoint's due deliveries are sent in `sequence` order by one thread.

The claim is one conditional UPDATE (`lease_until` past or empty, then ours until `LEASE`
from now), so several workers, on several hosts, share the endpoints of one PostgreSQL
database and never send to one endpoint, let alone one attempt, twice at once; a worker killed
mid-attempt leaves its lease to expire, and the attempt is made again (at least once). A slow
endpoint holds one thread only: the others keep sending to theirs. On SQLite, run one worker.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from django.db import close_old_connections, connections
from django.db.models import Q
from django.utils import timezone

from services.models import DeliveryState, WebhookDelivery, WebhookEndpoint
from services.storage.connections import keeping_connections
from services.webhooks.delivery import Due, Result, record_results, send_attempt
from services.webhooks.endpoints import signing_secrets
from services.webhooks.publishing import publish_all
from services.webhooks.signing import body_of

# Longer than an attempt's deadline (10 s) with room: renewed before an attempt once it is
# RENEW_SECONDS old, so an attempt always starts with 40 s of it left.
LEASE = timedelta(seconds=60)
RENEW_SECONDS = 20.0
# Deliveries sent per claim before the endpoint is let go (and may go to another worker).
BATCH = 200
# Deliveries read, signed and recorded together.
CHUNK = 25


def new_owner() -> str:
    """A worker's name in the leases it takes: host, process and a random part."""
    return f"{socket.gethostname()[:32]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def due_endpoints(*, limit: int = 100) -> list[str]:
    """Enabled endpoints with a delivery due now and no live lease."""
    now = timezone.now()
    due = WebhookDelivery.objects.filter(
        state=DeliveryState.PENDING, next_attempt_at__lte=now
    ).values("endpoint_id")
    rows = WebhookEndpoint.objects.filter(enabled=True, pk__in=due).filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    )
    return list(rows.order_by("pk").values_list("pk", flat=True)[:limit])


def claim(endpoint_id: str, owner: str) -> bool:
    """Take (or renew) the endpoint's lease; False when another worker holds it."""
    now = timezone.now()
    return bool(
        WebhookEndpoint.objects.filter(pk=endpoint_id, enabled=True)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now) | Q(lease_owner=owner))
        .update(lease_until=now + LEASE, lease_owner=owner)
    )


def release(endpoint_id: str, owner: str) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint_id, lease_owner=owner).update(
        lease_until=None, lease_owner=""
    )


def due_deliveries(endpoint_id: str, *, limit: int) -> list[Due]:
    """The endpoint's due deliveries, lowest sequence first, with their bodies: one query."""
    rows = (
        WebhookDelivery.objects.filter(
            endpoint_id=endpoint_id,
            state=DeliveryState.PENDING,
            next_attempt_at__lte=timezone.now(),
        )
        .order_by("sequence")
        .values_list(
            "pk",
            "attempts",
            "event_id",
            "event__type",
            "event__occurred_at",
            "sequence",
            "event__data",
        )[:limit]
    )
    return [
        Due(pk, attempts, event_id, body_of(type=t, occurred_at=at, sequence=n, data=data))
        for pk, attempts, event_id, t, at, n, data in rows
    ]


def drain_endpoint(endpoint_id: str, owner: str) -> int:
    """Under the endpoint's lease: its due deliveries in sequence order (at most BATCH), each
    one attempt; how many attempts were made. They are read, signed and recorded CHUNK at a
    time (a failure is recorded at once: it may disable the endpoint), so a worker killed
    mid-chunk sends that chunk again (at least once). The lease is renewed before an attempt
    once it is RENEW_SECONDS old, and the sending stops when it is lost."""
    made = 0
    if not claim(endpoint_id, owner):
        return 0
    renewed = time.monotonic()
    try:
        endpoint = WebhookEndpoint.objects.get(pk=endpoint_id)
        while made < BATCH and endpoint.enabled:
            chunk = due_deliveries(endpoint_id, limit=min(CHUNK, BATCH - made))
            if not chunk:
                break
            signing = signing_secrets(endpoint, now=timezone.now())
            sent: list[tuple[Due, Result]] = []
            for due in chunk:
                if time.monotonic() - renewed >= RENEW_SECONDS:
                    if not claim(endpoint_id, owner):
                        record_results(endpoint, sent)
                        return made + len(sent)
                    renewed = time.monotonic()
                result = send_attempt(endpoint, signing, due)
                sent.append((due, result))
                if not result.delivered:
                    record_results(endpoint, sent)
                    made, sent = made + len(sent), []
                    if not endpoint.enabled:
                        break
            record_results(endpoint, sent)
            made += len(sent)
    finally:
        release(endpoint_id, owner)
    return made


@dataclass
class Worker:
    """A pool of `threads` threads; `run_once` sends what is due now, `run` loops: it looks
    for due endpoints every `poll_seconds`, and at once when a thread let an endpoint go
    after a full batch (its backlog is not paced by the poll)."""

    threads: int = 4
    poll_seconds: float = 1.0
    owner: str = ""

    def __post_init__(self) -> None:
        self.owner = self.owner or new_owner()
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="webhooks")
        self._busy: dict[str, Future[int]] = {}
        self.stopping = threading.Event()
        self._wake = threading.Event()

    def stop(self) -> None:
        """End `run` after the attempts in flight (safe in a signal handler)."""
        self.stopping.set()
        self._wake.set()

    def _drain(self, endpoint_id: str) -> int:
        try:
            with keeping_connections():
                return drain_endpoint(endpoint_id, self.owner)
        finally:
            connections.close_all()

    def _drained(self, future: Future[int]) -> None:
        if not future.cancelled() and future.exception() is None and future.result() >= BATCH:
            self._wake.set()  # more may be due: look again now, not at the next poll

    def start_due(self) -> int:
        """Hand every due endpoint not already in hand to a thread; how many were handed."""
        self._busy = {pk: f for pk, f in self._busy.items() if not f.done()}
        started = 0
        for endpoint_id in due_endpoints():
            if endpoint_id not in self._busy and len(self._busy) < self.threads:
                future = self._pool.submit(self._drain, endpoint_id)
                future.add_done_callback(self._drained)
                self._busy[endpoint_id] = future
                started += 1
        return started

    def run_once(self) -> int:
        """Send everything due now and wait for it (tests, `--once`): attempts made."""
        made = 0
        while True:
            close_old_connections()
            publish_all()
            self.start_due()
            if not self._busy:
                return made
            for future in list(self._busy.values()):
                made += future.result()
            self._busy.clear()

    def run(self, *, tick: Callable[[], None] | None = None) -> None:
        """Loop until `stopping` is set, polling every `poll_seconds`."""
        while not self.stopping.is_set():
            close_old_connections()
            publish_all()
            self.start_due()
            if tick is not None:
                tick()
            self._wake.wait(self.poll_seconds)
            self._wake.clear()
        self._pool.shutdown(wait=True)


def deliver_due(*, owner: str = "") -> int:
    """Send everything due now in this thread, endpoint after endpoint: attempts made."""
    owner = owner or new_owner()
    made = 0
    publish_all()
    while endpoints := due_endpoints():
        sent = sum(drain_endpoint(endpoint_id, owner) for endpoint_id in endpoints)
        made += sent
        if not sent:
            break
    return made
