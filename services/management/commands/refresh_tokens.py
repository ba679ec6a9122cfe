from collections.abc import Iterator
from typing import cast

from django.core.management.base import CommandError

from providers.management.base import CredvaultCommand
from services.models import Account
from services.oauth.expiring import Outcome, refresh_expiring

BAR_WIDTH = 30


class Command(CredvaultCommand):
    help = (
        "Refresh every OAuth set that expires within the window (for cron): a progress bar on a "
        "terminal, one line per failure on standard error, a non-zero exit when any failed. "
        "Each refresh is one at a time per service, as on use; the provider's refusal marks "
        "the service reauthorization_required."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--ahead",
            type=int,
            default=10,
            metavar="MINUTES",
            help="Refresh the sets that expire within this many minutes (default 10).",
        )

    def handle(self, *args, ahead: int, **options) -> None:
        if ahead < 0:
            raise CommandError("--ahead must be 0 or more minutes")
        outcomes = refresh_expiring(ahead_seconds=ahead * 60)
        # First the number of sets due, then their outcomes.
        total = cast(int, next(outcomes))
        terminal = self.stdout.isatty()
        names = dict(Account.objects.values_list("id", "name"))
        done = failed = 0
        for outcome in cast(Iterator[Outcome], outcomes):
            done += 1
            if outcome.error:
                failed += 1
                if terminal:
                    self.stdout.write("")
                self.stderr.write(
                    f"{names.get(outcome.account_id, outcome.account_id)}/{outcome.service}: "
                    f"{outcome.error}"
                )
            if terminal:
                filled = BAR_WIDTH * done // max(total, 1)
                bar = "#" * filled + "." * (BAR_WIDTH - filled)
                self.stdout.write(f"\r[{bar}] {done}/{total}", ending="")
        if terminal and total:
            self.stdout.write("")
        self.stdout.write(f"{done - failed} refreshed, {failed} failed, of {total} due")
        if failed:
            raise CommandError(f"{failed} of {total} refreshes failed")
