from django.core.management.base import CommandError

from services.accounts import get_account, issue_token
from services.exceptions import AccountError
from services.management.base import CredvaultCommand, manage_command
from services.management.expiry import add_expires_in, lifetime


class Command(CredvaultCommand):
    help = (
        "Issue an API token for an account. Prints the token alone on stdout, once: "
        f"TOKEN=$({manage_command()} issue_token demo)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument("--name", default="", help="A label shown by list_tokens.")
        add_expires_in(parser)

    def handle(self, *args, account: str, name: str, expires_in: int | None, **options) -> None:
        duration = lifetime(expires_in)
        try:
            owner = get_account(name=account)
            issued = issue_token(
                account=owner,
                name=name,
                expires_in=duration,
            )
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(issued.plaintext)
        self.stderr.write(f"issued {issued.token.prefix} for {owner.name}; it is shown only once")
