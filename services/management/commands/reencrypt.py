from django.core.management.base import CommandError

from services.crypto import DecryptionError, KeyRingError, key_ring
from services.management.base import CredvaultCommand
from services.rotation import pending_count, reencrypt_batch


class Command(CredvaultCommand):
    help = (
        "Re-seal every stored value that is not under the first key of "
        "CREDVAULT_ENCRYPTION_KEYS, in batches. Resumable: run it again after an interruption. "
        "When it reports 0 remaining, older keys can be removed from the key ring."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size: int, **options) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            primary = key_ring().primary_id
        except KeyRingError as exc:
            raise CommandError(f"CREDVAULT_ENCRYPTION_KEYS is invalid: {exc}") from None
        total = pending_count()
        self.stdout.write(f"{total} value(s) to re-seal under key {primary}")
        done = 0
        while True:
            try:
                count = reencrypt_batch(batch_size=batch_size)
            except DecryptionError as exc:
                raise CommandError(
                    f"stopped after {done} re-sealed: {exc}. Nothing of that batch changed."
                ) from None
            if not count:
                break
            done += count
            self.stdout.write(f"re-sealed {done}/{total}")
        self.stdout.write(f"done: {done} re-sealed, {pending_count()} remaining")
