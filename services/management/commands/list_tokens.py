from django.core.management.base import CommandError
from django.utils import timezone

from services.accounts import get_account
from services.exceptions import AccountError
from services.management.base import CredvaultCommand
from services.management.listing import token_status, when
from services.models import ApiToken


class Command(CredvaultCommand):
    help = "List API tokens (prefixes only), of every account or of one."

    def add_arguments(self, parser) -> None:
        parser.add_argument("account", nargs="?")

    def handle(self, *args, account: str | None, **options) -> None:
        tokens = ApiToken.objects.select_related("account").order_by("account__name", "created_at")
        if account:
            try:
                tokens = tokens.filter(account=get_account(name=account))
            except AccountError as exc:
                raise CommandError(str(exc)) from None
        now = timezone.now()
        self.stdout.write(
            f"{'PREFIX':<14}{'ACCOUNT':<20}{'NAME':<20}{'CREATED':<21}{'LAST USED':<21}"
            f"{'EXPIRES':<21}STATUS"
        )
        for token in tokens:
            self.stdout.write(
                f"{token.prefix:<14}{token.account.name:<20}{token.name[:19]:<20}"
                f"{when(token.created_at):<21}{when(token.last_used_at):<21}"
                f"{when(token.expires_at):<21}{token_status(token, now)}"
            )
