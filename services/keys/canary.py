"""The start-up self-check: a worker unwraps the canary's data key and opens the canary value
before it serves, so a key manager that is unreachable, refuses, or holds another key stops it
with the check's id naming the cause. The first start seals the canary. It also wraps a
throwaway key under the current key-encryption key, which the canary's may not be yet."""

from __future__ import annotations

import secrets

from services.crypto import KEY_BYTES, DecryptionError, Place, open_value, seal_value
from services.keys import data_keys
from services.keys.managers import (
    KeyManagerError,
    KeyManagerUnreachable,
    key_manager,
    settings_problem,
    wrapping_context,
)
from services.masking import Secret
from services.models import KeyCanary

CANARY = "credvault key canary"
CANARY_PLACE = Place(0, "canary", "key-canary", 0)
CANARY_ROW = "the key canary"

# The check ids that name the cause (services/checks.py reports them).
SETTINGS = "credvault.E029"
UNREACHABLE = "credvault.E030"
REFUSED = "credvault.E031"
WRONG_KEY = "credvault.E032"


def open_canary(*, fresh: bool) -> None:
    """Open the canary value under its data key, sealing both first when there are none;
    `fresh` also wraps a throwaway key under the current key-encryption key (the canary may be
    wrapped by an older one) and unwraps the canary's key even when this process has it
    cached. Raises KeyManagerError or DecryptionError."""
    if fresh:
        probe = wrapping_context(account="canary", data_key="probe")
        key_manager().wrap(secrets.token_bytes(KEY_BYTES), context=probe)
    row = KeyCanary.objects.order_by("pk").first()
    if row is None:
        reference, cipher = data_keys.current_key(None)
        sealed = seal_value(cipher, reference, Secret(CANARY), CANARY_PLACE)
        row = KeyCanary.objects.create(key_id=reference, ciphertext=sealed)
    if fresh:
        data_keys.cache.forget_account(None)
    cipher = data_keys.key_of(row.key_id, account_id=None, row=CANARY_ROW)
    opened = open_value(cipher, row.key_id, bytes(row.ciphertext), CANARY_PLACE, row=CANARY_ROW)
    if opened.reveal() != CANARY:
        raise DecryptionError(f"{CANARY_ROW} opened to another value")


def problem(*, fresh: bool = True) -> tuple[str, str] | None:
    """(check id, one line) of what stops the canary from opening, or None."""
    unusable = settings_problem()
    if unusable is not None:
        return SETTINGS, f"the key manager's settings: {unusable}"
    try:
        open_canary(fresh=fresh)
    except KeyManagerUnreachable as exc:
        return UNREACHABLE, f"the key manager is unreachable: {exc}"
    except KeyManagerError as exc:
        return REFUSED, f"the key manager refused: {exc}"
    except DecryptionError as exc:
        return WRONG_KEY, f"the key canary does not open: {exc}"
    return None
