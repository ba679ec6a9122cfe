from django.core.management.base import CommandError

from providers.management.base import CredvaultCommand
from services.accounts import AccountError, revoke_token


class Command(CredvaultCommand):
    help = (
        "Revoke the account token (cvt_) or agent token (cva_) with this display prefix "
        "(the kind and 8 characters)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("prefix")

    def handle(self, *args, prefix: str, **options) -> None:
        try:
            token = revoke_token(prefix=prefix)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"revoked {token.prefix} of {token.account.name}")
