from django.core.management.base import CommandError

from services.accounts import named_or_all
from services.checkpoints import write_checkpoint
from services.crypto import KeyRingError
from services.exceptions import AccountError
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = (
        "Sign a checkpoint of the audit chain of one account, or of every account, now (cron, "
        "or before a backup): what the server does at most every "
        "CREDVAULT_AUDIT_CHECKPOINT_SECONDS while events arrive. Prints each checkpoint; keep "
        "the lines outside the database to check later with `verify_audit --expect`."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account", nargs="?")

    def handle(self, *args, account: str | None, **options) -> None:
        try:
            for owner in named_or_all(account):
                checkpoint = write_checkpoint(account_id=owner.pk)
                if checkpoint is None:
                    self.stdout.write(f"account {owner.name}: no event since its last checkpoint")
                else:
                    self.stdout.write(
                        f"account {owner.name}: checkpoint at {checkpoint.seq}:{checkpoint.digest}"
                    )
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        except KeyRingError as exc:
            raise CommandError(f"CREDVAULT_AUDIT_KEYS is invalid: {exc}") from None
