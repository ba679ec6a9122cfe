"""Sealing and opening one stored value under its account's data key: the one way every sealed
kind (services/sealed.py) is sealed and opened.

A value sealed before data keys (format 1, services/crypto.py) still opens with the key of
CREDVAULT_ENCRYPTION_KEYS its row names, until `reencrypt` or `migrate_key_manager` seals it
again. A key manager that refuses or does not answer, for a key not cached, is
KeyManagerUnavailable (503 `key_manager_unavailable`) before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.crypto import (
    RING_FORMAT,
    DecryptionError,
    Place,
    format_of,
    open_value,
    row_name,
    seal_value,
)
from services.exceptions import KeyManagerUnavailable
from services.keys import data_keys
from services.keys.managers import KeyManagerError, ring_manager
from services.masking import Secret
from services.models import CredentialField

logger = logging.getLogger("credvault.keys")

T = TypeVar("T")


def with_key_manager(work: Callable[[], T]) -> T:
    """`work`, whose key-manager refusal or silence becomes KeyManagerUnavailable, logged in
    one line."""
    try:
        return work()
    except KeyManagerError as exc:
        logger.error("key manager unavailable: %s", exc)
        raise KeyManagerUnavailable() from exc


def sealing_key(account_id: int) -> tuple[str, AESGCM]:
    """The reference and key that seal the account's values now (its newest data key, created
    with its first value): fetched once for a set of values."""
    return with_key_manager(lambda: data_keys.current_key(account_id))


def seal(value: Secret, place: Place) -> tuple[str, bytes]:
    """`value` sealed for `place` by its account's data key: (the key's reference, the stored
    bytes)."""
    reference, cipher = sealing_key(place.account_id)
    return reference, seal_value(cipher, reference, value, place)


def open(
    key_id: str,
    blob: bytes | memoryview,
    place: Place,
    *,
    field_id: int | str,
    table: str = CredentialField._meta.db_table,
) -> Secret:
    """The value stored in row `field_id` of `table` (a credential field unless named), sealed
    for `place` under `key_id`; DecryptionError naming the row when it does not open."""
    blob = bytes(blob)
    row = row_name(table, field_id, key_id, place)
    if format_of(blob) == RING_FORMAT:
        ring = ring_manager()
        cipher = ring.ring.cipher(key_id) if ring is not None else None
        if cipher is None:
            raise DecryptionError(
                f"{row} was sealed with a key id that is not in CREDVAULT_ENCRYPTION_KEYS"
            )
    else:
        cipher = with_key_manager(
            lambda: data_keys.key_of(key_id, account_id=place.account_id, row=row)
        )
    return open_value(cipher, key_id, blob, place, row=row)
