"""`manage.py rotate_keys`: every data key wrapped again under the current key-encryption key
(services/keys/rewrapping.py). No stored value changes."""

from __future__ import annotations

from django.core.management.base import CommandError

from services.keys.managers import KeyManagerError, calls_made, key_manager
from services.keys.rewrapping import rewrap_batch, wrapped_elsewhere
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = (
        "Wrap every data key again under the current key-encryption key (a new first key of "
        "CREDVAULT_ENCRYPTION_KEYS, a KMS alias moved to a new key, another HSM key), in "
        "batches. No stored value is sealed again. Resumable: run it again after an "
        "interruption and it continues."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size: int, **options) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        calls = calls_made()
        done = 0
        try:
            current = key_manager().current()
            total = sum(wrapped_elsewhere(current=current).values())
            self.stdout.write(f"{total} data key(s) to wrap under {current}")
            while count := rewrap_batch(batch_size=batch_size):
                done += count
                self.stdout.write(f"rewrapped {done}/{total}")
        except KeyManagerError as exc:
            raise CommandError(
                f"stopped after {done} rewrapped: {exc}. Run it again to continue."
            ) from None
        self.stdout.write(
            f"done: {done} data key(s) rewrapped under {current}, "
            f"{calls_made() - calls} key-manager call(s)"
        )
