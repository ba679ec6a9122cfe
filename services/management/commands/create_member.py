from django.core.management.base import CommandError, CommandParser

from services.accounts import get_account, refuse_if_deleted
from services.exceptions import AccountError
from services.management.base import CredvaultCommand
from services.members import LINK_HOURS, MAX_LINK_HOURS, MemberError, create_member


class Command(CredvaultCommand):
    help = (
        "Make EMAIL a member of ACCOUNT and print a one-time sign-in link, where the person "
        "sets a password; a member gets a new link in place of their unused ones."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account")
        parser.add_argument("email")
        parser.add_argument(
            "--expires-in",
            type=int,
            default=LINK_HOURS,
            metavar="HOURS",
            help=f"The link expires after this many hours (1 to {MAX_LINK_HOURS}; default "
            f"{LINK_HOURS}).",
        )

    def handle(
        self, *args: object, account: str, email: str, expires_in: int, **options: object
    ) -> None:
        if not 1 <= expires_in <= MAX_LINK_HOURS:
            raise CommandError(
                f"--expires-in takes a whole number of hours from 1 to {MAX_LINK_HOURS}"
            )
        try:
            owner = get_account(name=account)
            refuse_if_deleted(owner)
            link = create_member(account=owner, email=email, expires_in_hours=expires_in)
        except (AccountError, MemberError) as exc:
            raise CommandError(str(exc)) from None
        email = link.member.user.username
        self.stdout.write(link.url)
        if link.existed:
            said = f"{email} is a member of {owner.name} already: a new sign-in link"
        else:
            said = f"created member {email} of {owner.name}"
        until = f"{link.expires_at:%Y-%m-%d %H:%M} UTC"
        self.stderr.write(f"{said}, usable once until {until}; it is shown only once")
