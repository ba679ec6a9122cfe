from django.core.management.base import CommandError, CommandParser

from services.accounts import get_account
from services.exceptions import AccountError
from services.management.base import CredvaultCommand
from services.members import MemberError, normalized_email, remove_member


class Command(CredvaultCommand):
    help = "Remove the member EMAIL of ACCOUNT and end every session of theirs at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account")
        parser.add_argument("email")

    def handle(self, *args: object, account: str, email: str, **options: object) -> None:
        try:
            owner = get_account(name=account)
            remove_member(account=owner, email=email)
        except (AccountError, MemberError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"removed member {normalized_email(email)} of {owner.name}")
