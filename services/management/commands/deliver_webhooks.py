"""`manage.py deliver_webhooks`: the delivery worker (services/webhooks/worker.py)."""

from __future__ import annotations

import signal
import time
from typing import Any

from django.core.management.base import CommandError

from services.management.base import CredvaultCommand
from services.webhooks.expiring import raise_expiring
from services.webhooks.worker import Worker, deliver_due

# How often the worker looks for credentials that expire soon.
EXPIRING_SCAN_SECONDS = 600


class Command(CredvaultCommand):
    help = (
        "Publish the raised webhook events and send the deliveries that are due, endpoint by "
        "endpoint in sequence order, "
        "until stopped (SIGTERM or SIGINT ends it after the attempts in flight). Several "
        "workers share one PostgreSQL database; on SQLite run one."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--threads", type=int, default=4, help="Endpoints sent to at once (default 4)."
        )
        parser.add_argument(
            "--poll", type=float, default=1.0, help="Seconds between looks for work (default 1)."
        )
        parser.add_argument("--once", action="store_true", help="Send what is due now, then exit.")

    def handle(self, *args: Any, threads: int, poll: float, once: bool, **options: Any) -> None:
        if threads < 1 or poll <= 0:
            raise CommandError("--threads must be 1 or more and --poll above 0")
        if once:
            raise_expiring()
            made = deliver_due()
            self.stdout.write(f"{made} attempt(s) made")
            return
        worker = Worker(threads=threads, poll_seconds=poll)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: worker.stop())
        scanned = [0.0]

        def tick() -> None:
            if time.monotonic() - scanned[0] >= EXPIRING_SCAN_SECONDS:
                scanned[0] = time.monotonic()
                raise_expiring()

        self.stdout.write(f"delivering webhooks as {worker.owner} with {threads} thread(s)")
        self.stdout.flush()
        worker.run(tick=tick)
