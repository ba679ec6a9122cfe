"""The delivery worker: endpoints with due deliveries are claimed one at a time by a lease,
and each claimed endpoint's due deliveries are sent in `sequence` order by one thread.

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
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from django.db import close_old_connections, connections
from django.db.models import Q
from django.utils import timezone

from services.models import DeliveryState, WebhookDelivery, WebhookEndpoint
from services.webhooks.delivery import record_result, send_attempt

# Longer than an attempt's deadline (10 s) with room: a lease renewed before each attempt.
LEASE = timedelta(seconds=60)
# Deliveries sent per claim before the endpoint is let go (and may go to another worker).
BATCH = 50


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


def next_due(endpoint_id: str) -> WebhookDelivery | None:
    """The endpoint's due delivery of the lowest sequence."""
    return (
        WebhookDelivery.objects.filter(
            endpoint_id=endpoint_id,
            state=DeliveryState.PENDING,
            next_attempt_at__lte=timezone.now(),
        )
        .select_related("event", "endpoint")
        .order_by("sequence")
        .first()
    )


def drain_endpoint(endpoint_id: str, owner: str) -> int:
    """Under the endpoint's lease: its due deliveries in sequence order (at most BATCH), each
    one attempt; how many attempts were made. Stops when its lease is lost."""
    made = 0
    try:
        while made < BATCH and claim(endpoint_id, owner):
            delivery = next_due(endpoint_id)
            if delivery is None:
                break
            record_result(delivery, send_attempt(delivery))
            made += 1
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
    while endpoints := due_endpoints():
        sent = sum(drain_endpoint(endpoint_id, owner) for endpoint_id in endpoints)
        made += sent
        if not sent:
            break
    return made
