from django.core.management.base import CommandError

from services.account_deletion import delete_account, sealed_values
from services.accounts import get_account, refuse_if_deleted
from services.exceptions import AccountError
from services.management.base import CredvaultCommand


def values_text(count: int) -> str:
    return f"{count} value" if count == 1 else f"{count} values"


class Command(CredvaultCommand):
    help = (
        "Delete an account for good (--yes): its values and its data keys (crypto-shredding), "
        "its tokens, agents, members, OAuth clients and webhook endpoints. The account row "
        "stays, inactive and its name taken, with its audit chain, which records the deletion "
        "(actor `cli`) and still verifies."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument(
            "--yes",
            action="store_true",
            help="delete it: without --yes nothing is changed",
        )

    def handle(self, *args, account: str, yes: bool, **options) -> None:
        try:
            owner = get_account(name=account)
            refuse_if_deleted(owner)
            if not yes:
                raise AccountError(
                    f"deleting {owner.name} needs --yes: it deletes for good its "
                    f"{values_text(sealed_values(owner.pk))}, its data key(s), its tokens, "
                    "agents, members, OAuth clients and webhook endpoints; its audit chain "
                    "stays; nothing was changed"
                )
            deleted = delete_account(account=owner)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{owner.name} deleted: {values_text(deleted.values)}, its data key(s) and its "
            "tokens; its audit chain stays"
        )
