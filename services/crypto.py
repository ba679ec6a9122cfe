"""Sealing and opening one value: AES-256-GCM, bound to the row it is stored in.

One sealed value (a `ciphertext` column; the name of the key that sealed it is in `key_id`
beside it):

    byte 0        format version: 2, sealed by the account's data key (`key_id` is the data
                  key's reference, `dk_<id>.<version>`, services/keys/); 1, sealed directly by
                  a key of CREDVAULT_ENCRYPTION_KEYS (`key_id` is the ring key's id), as every
                  value was before data keys; it still opens while the ring holds that key
    bytes 1..12   a fresh random 96-bit nonce
    bytes 13..    AES-256-GCM ciphertext of the value's UTF-8 bytes, then the 16-byte tag

The associated data, authenticated but not stored, is the compact JSON array
`[format, key_id, account_id, service, key_name, generation]`: a ciphertext opens only in the
row it was sealed for, under the key its row names. The ring is CREDVAULT_ENCRYPTION_KEYS,
comma-separated `KEYID:BASE64KEY` entries of 32-byte keys: the first wraps data keys under the
`local` key manager, every one opens.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

from services.masking import Secret

# The format of a value sealed by a ring key (before data keys) and by a data key.
RING_FORMAT = 1
DATA_KEY_FORMAT = 2
NONCE_BYTES = 12
KEY_BYTES = 32
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,32}")


class KeyRingError(ValueError):
    """A key setting (CREDVAULT_ENCRYPTION_KEYS, CREDVAULT_AUDIT_KEYS) is missing or malformed.
    Never holds key material."""


class DecryptionError(Exception):
    """A stored value did not open. Names the row (table, id, key id, account, service,
    keyName); never holds bytes of the value, so the log shows its message."""

    message_is_safe_to_log = True


@dataclass(frozen=True, slots=True)
class Place:
    """Where a value is stored: what its associated data binds it to."""

    account_id: int
    service: str
    key_name: str
    generation: int


def _associated_data(key_id: str, place: Place, *, version: int) -> bytes:
    fields = [
        version,
        key_id,
        place.account_id,
        place.service,
        place.key_name,
        place.generation,
    ]
    return json.dumps(fields, separators=(",", ":")).encode("ascii")


def parse_key_entries(raw: str, *, setting: str) -> list[tuple[str, bytes]]:
    """The `KEYID:BASE64KEY` entries of a key setting (the encryption keys, the audit keys),
    each key 32 bytes, ids unique, in order. Errors name the entry, never its key."""
    if not raw or not raw.strip():
        raise KeyRingError(f"{setting} is not set")
    keys: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for position, entry in enumerate(raw.split(","), start=1):
        key_id, sep, encoded = entry.strip().partition(":")
        if not sep:
            raise KeyRingError(f"entry {position} is not of the form KEYID:BASE64KEY")
        if not KEY_ID_PATTERN.fullmatch(key_id):
            raise KeyRingError(f"entry {position}: the key id must be 1 to 32 of A-Z a-z 0-9 _ . -")
        if key_id in seen:
            raise KeyRingError(f"entry {position}: duplicate key id {key_id!r}")
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise KeyRingError(f"key {key_id!r} is not valid base64") from None
        if len(key) != KEY_BYTES:
            raise KeyRingError(f"key {key_id!r} is {len(key)} bytes; it must be {KEY_BYTES}")
        seen.add(key_id)
        keys.append((key_id, key))
    return keys


class KeyRing:
    """Named AES-256-GCM keys; the first seals, all open."""

    def __init__(self, keys: list[tuple[str, bytes]]) -> None:
        if not keys:
            raise KeyRingError("the key ring is empty")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys}
        self.primary_id = keys[0][0]

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self._ciphers)!r})"

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._ciphers)

    @classmethod
    def parse(cls, raw: str) -> KeyRing:
        """Parse CREDVAULT_ENCRYPTION_KEYS. Errors name the entry, never its key."""
        return cls(parse_key_entries(raw, setting="CREDVAULT_ENCRYPTION_KEYS"))

    def cipher(self, key_id: str) -> AESGCM | None:
        """The cipher of the ring's key `key_id`, or None when the ring does not hold it."""
        return self._ciphers.get(key_id)

    @property
    def primary(self) -> AESGCM:
        return self._ciphers[self.primary_id]


def format_of(blob: bytes) -> int | None:
    """The format version of a stored value, or None when it is too short to be one."""
    if len(blob) < 1 + NONCE_BYTES + 16:
        return None
    return blob[0]


def seal_value(cipher: AESGCM, key_id: str, value: Secret, place: Place) -> bytes:
    """`value` sealed by a data key (`cipher`, named `key_id`) for `place`: the stored bytes."""
    nonce = os.urandom(NONCE_BYTES)
    aad = _associated_data(key_id, place, version=DATA_KEY_FORMAT)
    return bytes([DATA_KEY_FORMAT]) + nonce + cipher.encrypt(nonce, value.encode(), aad)


def open_value(cipher: AESGCM, key_id: str, blob: bytes, place: Place, *, row: str) -> Secret:
    """The value of `blob`, sealed by `cipher` (named `key_id`) for `place`, in either format;
    DecryptionError naming `row` when it was altered or moved."""
    version = format_of(blob)
    if version not in (RING_FORMAT, DATA_KEY_FORMAT):
        raise DecryptionError(f"{row} is not in a known storage format")
    nonce, sealed = blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :]
    try:
        plain = cipher.decrypt(nonce, sealed, _associated_data(key_id, place, version=version))
    except InvalidTag:
        raise DecryptionError(
            f"{row} failed authentication: it was altered or moved from another row"
        ) from None
    return Secret(plain.decode("utf-8"))


def row_name(table: str, row_id: int | str, key_id: str, place: Place) -> str:
    """A stored value's row as errors name it: never a byte of the value."""
    return (
        f"{table} id {row_id} (key id {key_id!r}, account "
        f"{place.account_id}, service {place.service!r}, keyName {place.key_name!r})"
    )


@lru_cache(maxsize=4)
def _parsed(raw: str) -> KeyRing:
    return KeyRing.parse(raw)


def key_ring() -> KeyRing:
    """The key ring of the current settings (parsed once per distinct setting value);
    KeyRingError when it is missing or malformed."""
    return _parsed(settings.CREDVAULT_ENCRYPTION_KEYS)


def generate_key_entry(now: datetime | None = None) -> str:
    """A new `KEYID:BASE64KEY` entry: a dated id with a random suffix and 32 random bytes."""
    now = now or datetime.now(UTC)
    key_id = f"k{now:%Y%m%d}-{secrets.token_hex(3)}"
    return f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode('ascii')}"
