from django.core.management.base import CommandError

from services.crypto import DecryptionError
from services.exceptions import KeyManagerUnavailable
from services.management.base import CredvaultCommand
from services.rotation import current_run, finish, reencrypt_batch, reencrypt_pending


class Command(CredvaultCommand):
    help = (
        "Seal every stored value again under a new data key of its account, in batches. "
        "Resumable: run it again after an interruption and it continues the same run. Values "
        "sealed by a worker's cached older key meanwhile are reported; run it again after "
        "CREDVAULT_DATA_KEY_CACHE_SECONDS."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size: int, **options) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        run = current_run()
        total = reencrypt_pending(run)
        self.stdout.write(f"{total} value(s) to seal under new data keys")
        done = 0
        while True:
            try:
                count = reencrypt_batch(run, batch_size=batch_size)
            except DecryptionError as exc:
                raise CommandError(
                    f"stopped after {done} re-sealed: {exc}. Nothing of that batch changed."
                ) from None
            except KeyManagerUnavailable as exc:
                raise CommandError(
                    f"stopped after {done} re-sealed: {exc.__cause__}. Nothing of that batch "
                    "changed; run it again to continue."
                ) from None
            if not count:
                break
            done += count
            self.stdout.write(f"re-sealed {done}/{total}")
        remaining = reencrypt_pending(run)
        if not remaining:
            finish(run)
        self.stdout.write(f"done: {done} re-sealed, {remaining} remaining")
