from django.core.management.base import BaseCommand, CommandError

from services.accounts import AccountError, get_account
from services.audit import verify_chain
from services.models import Account


class Command(BaseCommand):
    help = (
        "Verify the hash chain of audit events of one account, or of every account. Names the "
        "first broken link (an edited, deleted or reordered event) and exits non-zero. Prints "
        "each chain's head digest: record it elsewhere to detect a rewritten chain."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account", nargs="?")

    def handle(self, *args, account: str | None, **options) -> None:
        if account:
            try:
                accounts = [get_account(name=account)]
            except AccountError as exc:
                raise CommandError(str(exc)) from None
        else:
            accounts = list(Account.objects.order_by("name"))
        broken = []
        for owner in accounts:
            count, failure = verify_chain(owner)
            if failure is None:
                self.stdout.write(
                    f"account {owner.name}: {count} events, chain intact, head {owner.audit_head}"
                )
            else:
                broken.append(failure)
                self.stderr.write(str(failure))
        if broken:
            raise CommandError(f"{len(broken)} broken chain(s)")
