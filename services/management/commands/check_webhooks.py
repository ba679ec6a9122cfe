"""`manage.py check_webhooks`: the delivery backlog and the oldest undelivered event's age."""

from __future__ import annotations

from typing import Any

from services.management.base import CredvaultCommand
from services.webhooks.health import backlog


class Command(CredvaultCommand):
    help = (
        "Print the webhook backlog: events not yet published, pending deliveries, those due "
        "now, disabled endpoints, and the age in seconds of the oldest undelivered event (0 "
        "with none)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        found = backlog()
        self.stdout.write(f"unpublished events: {found.unpublished}")
        self.stdout.write(f"pending deliveries: {found.pending}")
        self.stdout.write(f"due now: {found.due}")
        self.stdout.write(f"failed deliveries: {found.failed}")
        self.stdout.write(f"disabled endpoints: {found.disabled_endpoints}")
        self.stdout.write(f"oldest undelivered event age: {found.oldest_age_seconds:.0f} s")
