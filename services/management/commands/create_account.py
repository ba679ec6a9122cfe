from django.core.management.base import CommandError

from services.accounts import create_account
from services.exceptions import AccountError
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = "Create an account. The name follows the service-identifier rules."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")

    def handle(self, *args, name: str, **options) -> None:
        try:
            account = create_account(name=name)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"created account {account.name}")
