from datetime import timedelta

from django.core.management.base import CommandError

from services.accounts import expire_token
from services.bearer_tokens import MAX_LIFETIME_DAYS
from services.exceptions import AccountError
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = (
        "Make the account token (cvt_) or agent token (cva_) with this display prefix expire "
        "now, or in --in-days DAYS. Recorded in its account's audit chain (actor `cli`). A "
        "revoked token is refused (exit status 1): it stays refused whatever its expiry."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("prefix")
        parser.add_argument("--in-days", type=int, default=0, metavar="DAYS")

    def handle(self, *args, prefix: str, in_days: int, **options) -> None:
        if not 0 <= in_days <= MAX_LIFETIME_DAYS:
            raise CommandError(f"--in-days takes a whole number from 0 to {MAX_LIFETIME_DAYS}")
        try:
            token = expire_token(prefix=prefix, expires_in=timedelta(days=in_days))
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        moment = f"{token.expires_at:%Y-%m-%d %H:%M:%S}"
        self.stdout.write(f"{token.prefix} of {token.account.name} expires {moment} UTC")
