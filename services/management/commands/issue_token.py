from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from services.accounts import AccountError, get_account, issue_token


class Command(BaseCommand):
    help = (
        "Issue an API token for an account. Prints the token alone on stdout, once: "
        "TOKEN=$(python manage.py issue_token demo)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument("--name", default="", help="A label shown by list_tokens.")
        parser.add_argument(
            "--expires-in", type=int, metavar="DAYS", help="Expire after this many days."
        )

    def handle(self, *args, account: str, name: str, expires_in: int | None, **options) -> None:
        if expires_in is not None and expires_in < 1:
            raise CommandError("--expires-in takes a whole number of days, 1 or more")
        try:
            owner = get_account(name=account)
            issued = issue_token(
                account=owner,
                name=name,
                expires_in=timedelta(days=expires_in) if expires_in else None,
            )
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(issued.plaintext)
        self.stderr.write(f"issued {issued.token.prefix} for {owner.name}; it is shown only once")
