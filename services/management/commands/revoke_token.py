from django.core.management.base import CommandError

from services.accounts import find_token, revoke_token, revoked_at
from services.exceptions import AccountError
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = (
        "Revoke the account token (cvt_) or agent token (cva_) with this display prefix "
        "(the kind and 8 characters), or this whole token. A token revoked already is left "
        "as it was, said so on standard output, exit status 0."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("prefix")

    def handle(self, *args, prefix: str, **options) -> None:
        try:
            token = find_token(prefix=prefix)
            if token.revoked_at is not None:
                # What the operator wants holds already: said, and not an error, as
                # `deactivate_account` of a deactivated account.
                self.stdout.write(
                    f"{token.prefix} of {token.account.name} was revoked already, "
                    f"at {revoked_at(token)}"
                )
                return
            token = revoke_token(prefix=prefix)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"revoked {token.prefix} of {token.account.name}")
