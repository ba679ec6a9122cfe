"""`manage.py migrate_key_manager`: from the local ring to the key manager of
CREDVAULT_KEY_MANAGER. Step 1 wraps the data keys (the canary's too) still wrapped by the ring
under the new manager; step 2 seals the values sealed directly by the ring, before data keys,
under their account's data key. Then the ring can be removed."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError

from services.crypto import DecryptionError
from services.exceptions import KeyManagerUnavailable
from services.keys.managers import (
    LOCAL,
    RING_WRAPPED,
    KeyManagerError,
    calls_made,
    key_manager,
    ring_manager,
)
from services.keys.rewrapping import rewrap_batch, wrapped_elsewhere
from services.management.base import CredvaultCommand
from services.rotation import reseal_ring_batch, ring_sealed_count


class Command(CredvaultCommand):
    help = (
        "Move from the local ring to the key manager of CREDVAULT_KEY_MANAGER, the old ring "
        "still given in CREDVAULT_ENCRYPTION_KEYS: wrap the ring's data keys under the new "
        "manager, then seal the values sealed before data keys under their account's data key. "
        "Resumable: run it again after an interruption and it continues."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size: int, **options) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        if settings.CREDVAULT_KEY_MANAGER == LOCAL:
            raise CommandError(
                "CREDVAULT_KEY_MANAGER is local: set it to the key manager to move to "
                "(aws-kms or pkcs11), with the old ring still in CREDVAULT_ENCRYPTION_KEYS"
            )
        if not settings.CREDVAULT_ENCRYPTION_KEYS:
            raise CommandError(
                "CREDVAULT_ENCRYPTION_KEYS must still hold the old ring: its keys unwrap the "
                "data keys and open the values this command moves"
            )
        rewrapped = resealed = 0
        try:
            if ring_manager() is None:
                raise CommandError("CREDVAULT_ENCRYPTION_KEYS is malformed")
            calls = calls_made()
            current = key_manager().current()
            keys = sum(wrapped_elsewhere(current=current, prefix=RING_WRAPPED).values())
            self.stdout.write(f"step 1: {keys} data key(s) of the ring to wrap under {current}")
            while count := rewrap_batch(batch_size=batch_size, prefix=RING_WRAPPED):
                rewrapped += count
                self.stdout.write(f"rewrapped {rewrapped}/{keys}")
            values = ring_sealed_count()
            self.stdout.write(f"step 2: {values} value(s) sealed by the ring to seal again")
            while count := reseal_ring_batch(batch_size=batch_size):
                resealed += count
                self.stdout.write(f"re-sealed {resealed}/{values}")
            left = (
                sum(wrapped_elsewhere(current=current, prefix=RING_WRAPPED).values())
                + ring_sealed_count()
            )
        except KeyManagerError as exc:
            raise CommandError(self._stopped(rewrapped, resealed, str(exc))) from None
        except KeyManagerUnavailable as exc:
            raise CommandError(self._stopped(rewrapped, resealed, str(exc.__cause__))) from None
        except DecryptionError as exc:
            raise CommandError(self._stopped(rewrapped, resealed, str(exc))) from None
        summary = (
            f"done: {rewrapped} data key(s) rewrapped, {resealed} value(s) re-sealed, "
            f"{calls_made() - calls} key-manager call(s)"
        )
        if left:
            self.stdout.write(f"{summary}; {left} left (written meanwhile): run it again")
        else:
            self.stdout.write(f"{summary}; the old ring can be removed")

    @staticmethod
    def _stopped(rewrapped: int, resealed: int, cause: str) -> str:
        return (
            f"stopped after {rewrapped} rewrapped and {resealed} re-sealed: {cause}. Run it "
            "again to continue."
        )
