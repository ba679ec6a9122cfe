"""Each account's data keys: created with its first sealed value, stored only wrapped, and
unwrapped once per cache period into the worker's memory.

The newest version of an account's data key seals its values; every version opens the values
that name it. A version is created in the transaction of the value it first seals, so the key
and the value commit or roll back together, and it enters the cache only once committed: until
then this thread reads it from the database (where only its own transaction sees it), so a key
rolled back is never used again. The canary's data key has no account
(services/keys/canary.py).

The cache is per process and in memory only: an unwrapped key is dropped after
CREDVAULT_DATA_KEY_CACHE_SECONDS or CREDVAULT_DATA_KEY_CACHE_USES uses, whichever comes first,
and never written anywhere. With the key manager unreachable, a key in the cache still works
and one that is not fails (KeyManagerError): nothing is sealed or opened without its key.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from services.crypto import KEY_BYTES, DecryptionError
from services.keys.managers import key_manager, manager_for, wrapping_context
from services.models import DataKey

# What a sealed value's `key_id` holds for a data key: `dk_<16 hex>.<version>`.
REFERENCE_HEAD = "dk_"


def new_key_id() -> str:
    return f"{REFERENCE_HEAD}{secrets.token_hex(8)}"


def is_reference(key_id: str) -> bool:
    return key_id.startswith(REFERENCE_HEAD)


def split_reference(reference: str) -> tuple[str, int] | None:
    """(data key id, version) of a reference, or None when it is not one."""
    key_id, _, version = reference.rpartition(".")
    if not key_id.startswith(REFERENCE_HEAD) or not version.isdigit():
        return None
    return key_id, int(version)


def context_of(row: DataKey) -> dict[str, str]:
    """What the wrapped key is bound to: its account (or the canary) and its reference."""
    account = "canary" if row.account_id is None else str(row.account_id)
    return wrapping_context(account=account, data_key=row.reference)


@dataclass(slots=True)
class _Entry:
    cipher: AESGCM
    account_id: int | None
    expires: float
    uses_left: int


class DataKeyCache:
    """Unwrapped data keys of this process, bounded in seconds and uses."""

    def __init__(self) -> None:
        self._keys: dict[str, _Entry] = {}
        self._current: dict[int | None, str] = {}
        self._lock = threading.Lock()

    def cipher(self, reference: str, *, account_id: int | None) -> AESGCM | None:
        """The cached key of `reference` (one use counted), or None."""
        with self._lock:
            entry = self._keys.get(reference)
            if entry is None:
                return None
            if entry.account_id != account_id:
                return None
            if entry.uses_left <= 0 or time.monotonic() >= entry.expires:
                self._drop(reference)
                return None
            entry.uses_left -= 1
            return entry.cipher

    def current(self, account_id: int | None) -> tuple[str, AESGCM] | None:
        reference = self._current.get(account_id)
        if reference is None:
            return None
        cipher = self.cipher(reference, account_id=account_id)
        return None if cipher is None else (reference, cipher)

    def put(
        self,
        reference: str,
        cipher: AESGCM,
        *,
        account_id: int | None,
        current: bool,
        used: bool = True,
    ) -> None:
        """Cache a key just unwrapped (or created): `used`, that counts as its first use."""
        entry = _Entry(
            cipher,
            account_id,
            time.monotonic() + settings.CREDVAULT_DATA_KEY_CACHE_SECONDS,
            settings.CREDVAULT_DATA_KEY_CACHE_USES - (1 if used else 0),
        )
        with self._lock:
            self._keys[reference] = entry
            if current:
                self._current[account_id] = reference

    def _drop(self, reference: str) -> None:
        entry = self._keys.pop(reference, None)
        if entry is not None and self._current.get(entry.account_id) == reference:
            del self._current[entry.account_id]

    def forget_account(self, account_id: int | None) -> None:
        with self._lock:
            for reference in [r for r, e in self._keys.items() if e.account_id == account_id]:
                self._drop(reference)
            self._current.pop(account_id, None)

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()
            self._current.clear()

    def __len__(self) -> int:
        return len(self._keys)


cache = DataKeyCache()


def _of_account(account_id: int | None) -> QuerySet[DataKey]:
    if account_id is None:
        return DataKey.objects.filter(account__isnull=True)
    return DataKey.objects.filter(account_id=account_id)


def unwrap(row: DataKey) -> AESGCM:
    """The data key of `row`, unwrapped by the manager that wrapped it (a key-manager call)."""
    wrapped_by = row.wrapped_by
    key = manager_for(wrapped_by).unwrap(wrapped_by, bytes(row.wrapped), context=context_of(row))
    return AESGCM(key)


# References of the keys this thread created in a transaction not yet committed.
_uncommitted = threading.local()


def _uncommitted_references() -> set[str]:
    if not hasattr(_uncommitted, "references"):
        _uncommitted.references = set()
    references: set[str] = _uncommitted.references
    return references


def _cache(row: DataKey, cipher: AESGCM, *, current: bool) -> None:
    """Cache a key read from the database, unless this thread created it in a transaction that
    has not committed."""
    if row.reference not in _uncommitted_references():
        cache.put(row.reference, cipher, account_id=row.account_id, current=current)


def _cache_on_commit(row: DataKey, cipher: AESGCM) -> None:
    references = _uncommitted_references()
    references.add(row.reference)

    def committed() -> None:
        references.discard(row.reference)
        cache.put(row.reference, cipher, account_id=row.account_id, current=True)

    transaction.on_commit(committed)


def forget_uncommitted() -> None:
    """Forget which keys this thread created uncommitted (a test whose transaction stands for
    committed ones)."""
    _uncommitted_references().clear()


def create_version(account_id: int | None) -> tuple[DataKey, AESGCM]:
    """A new newest version of the account's data key, wrapped by the current key-encryption
    key; its first version when it has none. Cached once its transaction commits."""
    return _create(account_id, latest=_of_account(account_id).order_by("-version").first())


def _create(account_id: int | None, *, latest: DataKey | None) -> tuple[DataKey, AESGCM]:
    key_id = latest.key_id if latest is not None else new_key_id()
    version = latest.version + 1 if latest is not None else 1
    key = secrets.token_bytes(KEY_BYTES)
    row = DataKey(account_id=account_id, key_id=key_id, version=version)
    row.wrapped_by, row.wrapped = key_manager().wrap(key, context=context_of(row))
    row.created_at = row.wrapped_at = timezone.now()
    row.save(force_insert=True)
    cipher = AESGCM(key)
    _cache_on_commit(row, cipher)
    return row, cipher


def current_key(account_id: int | None) -> tuple[str, AESGCM]:
    """The reference and key that seal the account's values now: its newest data key, created
    with its first value."""
    found = cache.current(account_id)
    if found is not None:
        return found
    row = _of_account(account_id).order_by("-version").first()
    if row is not None:
        cipher = unwrap(row)
        _cache(row, cipher, current=True)
        return row.reference, cipher
    try:
        with transaction.atomic():
            row, cipher = _create(account_id, latest=None)
    except IntegrityError:
        # Another process created the account's first key meanwhile: use it.
        row = _of_account(account_id).order_by("-version").first()
        if row is None:
            raise
        cipher = unwrap(row)
        _cache(row, cipher, current=True)
    return row.reference, cipher


def key_of(reference: str, *, account_id: int | None, row: str) -> AESGCM:
    """The data key a value names, for a value of `account_id`; DecryptionError naming the
    value's `row` when no such key is stored for the account (shredded with it, or moved)."""
    cipher = cache.cipher(reference, account_id=account_id)
    if cipher is not None:
        return cipher
    parts = split_reference(reference)
    stored = (
        None
        if parts is None
        else _of_account(account_id).filter(key_id=parts[0], version=parts[1]).first()
    )
    if stored is None:
        raise DecryptionError(f"{row} names a data key that this account does not have")
    cipher = unwrap(stored)
    _cache(stored, cipher, current=False)
    return cipher
