from django.core.management.base import CommandError

from services.accounts import get_account, set_account_active
from services.exceptions import AccountError
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = (
        "Deactivate an account: every token of it is refused from its next request. "
        "Recorded in its audit chain (actor `cli`)."
    )
    active = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")

    def handle(self, *args, account: str, **options) -> None:
        try:
            owner = get_account(name=account)
            changed = set_account_active(account=owner, active=self.active)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        state = "active" if self.active else "deactivated"
        self.stdout.write(f"{owner.name} is {state}" + ("" if changed else " already"))
