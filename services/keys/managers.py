"""Key managers: who wraps the data keys. CREDVAULT_KEY_MANAGER chooses one.

- `local`: the first key of CREDVAULT_ENCRYPTION_KEYS wraps (AES-256-GCM, the context as
  associated data); every key of the ring unwraps.
- `aws-kms`: AWS KMS's Encrypt and Decrypt under CREDVAULT_KMS_KEY_ID (a key id, ARN or
  alias), with an encryption context naming the account and the data key; boto3's standard
  credentials chain and endpoint settings (`AWS_ENDPOINT_URL_KMS`).
- `pkcs11`: an AES key of an HSM (CREDVAULT_PKCS11_KEY_LABEL on the token
  CREDVAULT_PKCS11_TOKEN_LABEL, through the module CREDVAULT_PKCS11_MODULE, logged in with the
  PIN in CREDVAULT_PKCS11_PIN_FILE) wraps by AES key wrap with padding (RFC 5649).

Each wrapped data key records the key-encryption key that wrapped it (`wrapped_by`,
`manager:key`), so a key wrapped under another key, or another manager, is found and rewrapped
(`rotate_keys`, `migrate_key_manager`).

Two errors, both one line that never holds key material: KeyManagerError, a configuration the
manager refuses (an unknown KMS key, a wrong PIN, a module that does not load); and its kind
KeyManagerUnreachable, the manager not answering. Every call is counted (`calls`), for the
benchmark's figure of calls per read.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from django.conf import settings

from services.crypto import NONCE_BYTES, KeyRing, KeyRingError, key_ring

LOCAL = "local"
AWS_KMS = "aws-kms"
PKCS11 = "pkcs11"
MANAGERS = (LOCAL, AWS_KMS, PKCS11)
# How a data key wrapped by a key of the ring names it: `local:<key id>`.
RING_WRAPPED = f"{LOCAL}:"

# What a wrapped key is bound to: the account ("canary" for the canary) and the data key.
Context = Mapping[str, str]


class KeyManagerError(Exception):
    """The key manager refused: a configuration to correct. One line, safe to log."""

    message_is_safe_to_log = True


class KeyManagerUnreachable(KeyManagerError):
    """The key manager did not answer (stopped, unreachable, timed out)."""


def wrapping_context(*, account: str, data_key: str) -> dict[str, str]:
    return {"credvault:account": account, "credvault:data-key": data_key}


def _aad(context: Context) -> bytes:
    return json.dumps(sorted(context.items()), separators=(",", ":")).encode()


class KeyManager:
    """Wraps and unwraps 32-byte data keys under its key-encryption key."""

    name = ""

    def __init__(self) -> None:
        self.calls = 0

    def current(self) -> str:
        """`manager:key`: the key-encryption key that wraps now."""
        raise NotImplementedError

    def wrap(self, key: bytes, *, context: Context) -> tuple[str, bytes]:
        """`key` wrapped: (the key-encryption key's `manager:key`, the wrapped bytes)."""
        raise NotImplementedError

    def unwrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> bytes:
        raise NotImplementedError

    def rewrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> tuple[str, bytes]:
        """A key this manager wrapped (`wrapped_by`, any of its keys), wrapped again under its
        current key-encryption key. A key of another manager is unwrapped by that one
        (services/keys/rewrapping.py)."""
        return self.wrap(self.unwrap(wrapped_by, wrapped, context=context), context=context)

    def owns(self, wrapped_by: str) -> bool:
        """Whether this manager's key-encryption keys include `wrapped_by`'s."""
        return wrapped_by.startswith(f"{self.name}:")


class LocalKeyManager(KeyManager):
    """The ring of CREDVAULT_ENCRYPTION_KEYS: its first key wraps, every one unwraps."""

    name = LOCAL

    def __init__(self, ring: KeyRing) -> None:
        super().__init__()
        self.ring = ring

    def current(self) -> str:
        return f"{RING_WRAPPED}{self.ring.primary_id}"

    def wrap(self, key: bytes, *, context: Context) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE_BYTES)
        return self.current(), nonce + self.ring.primary.encrypt(nonce, key, _aad(context))

    def unwrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> bytes:
        manager, _, key_id = wrapped_by.partition(":")
        cipher = self.ring.cipher(key_id) if manager == LOCAL else None
        if cipher is None:
            raise KeyManagerError(
                f"a data key is wrapped by {wrapped_by!r}, which CREDVAULT_ENCRYPTION_KEYS "
                "does not hold"
            )
        try:
            return cipher.decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], _aad(context))
        except InvalidTag:
            raise KeyManagerError(
                f"a data key wrapped by {wrapped_by!r} failed authentication: it was altered "
                "or moved from another account"
            ) from None


class AwsKmsKeyManager(KeyManager):
    """AWS KMS: Encrypt and Decrypt with an encryption context, ReEncrypt to rotate."""

    name = AWS_KMS

    def __init__(self, key_id: str) -> None:
        super().__init__()
        if not key_id:
            raise KeyManagerError("CREDVAULT_KMS_KEY_ID must name a KMS key (id, ARN or alias)")
        self.key_id = key_id
        self._arn: str | None = None
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            # Short timeouts and one retry: an unreachable KMS is a quick 503, not a held worker.
            config = Config(connect_timeout=2, read_timeout=5, retries={"total_max_attempts": 2})
            self._client = boto3.client("kms", config=config)
        return self._client

    def _call(self, operation: str, **params: Any) -> Any:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            HTTPClientError,
            NoCredentialsError,
            NoRegionError,
        )

        self.calls += 1
        try:
            return getattr(self.client, operation)(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "error")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status >= 500 or code in ("ThrottlingException", "KMSInternalException"):
                raise KeyManagerUnreachable(f"AWS KMS answered {code} to {operation}") from None
            raise KeyManagerError(
                f"AWS KMS refused {operation} with CREDVAULT_KMS_KEY_ID {self.key_id!r}: {code}"
            ) from None
        except NoCredentialsError:
            raise KeyManagerError(
                "AWS KMS: no credentials found (boto3's standard chain: AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, or an instance role)"
            ) from None
        except NoRegionError:
            raise KeyManagerError(
                "AWS KMS: no region set (AWS_REGION or AWS_DEFAULT_REGION, or a key ARN)"
            ) from None
        except (ConnectionError, HTTPClientError) as exc:
            raise KeyManagerUnreachable(
                f"AWS KMS did not answer {operation} ({type(exc).__name__})"
            ) from None
        except BotoCoreError as exc:
            raise KeyManagerError(f"AWS KMS: {type(exc).__name__}") from None

    def current(self) -> str:
        if self._arn is None:
            described = self._call("describe_key", KeyId=self.key_id)
            self._arn = described["KeyMetadata"]["Arn"]
        return f"{AWS_KMS}:{self._arn}"

    def wrap(self, key: bytes, *, context: Context) -> tuple[str, bytes]:
        answer = self._call(
            "encrypt", KeyId=self.key_id, Plaintext=key, EncryptionContext=dict(context)
        )
        return f"{AWS_KMS}:{answer['KeyId']}", bytes(answer["CiphertextBlob"])

    def _wrapping_key(self, wrapped_by: str) -> str:
        """The ARN of the KMS key that wrapped a key (`aws-kms:ARN`)."""
        if not self.owns(wrapped_by):
            raise KeyManagerError(f"a data key is wrapped by {wrapped_by!r}, not by AWS KMS")
        return wrapped_by.removeprefix(f"{AWS_KMS}:")

    def unwrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> bytes:
        answer = self._call(
            "decrypt",
            CiphertextBlob=wrapped,
            EncryptionContext=dict(context),
            KeyId=self._wrapping_key(wrapped_by),
        )
        return bytes(answer["Plaintext"])

    def rewrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> tuple[str, bytes]:
        # One call: KMS decrypts and encrypts again without the key leaving it.
        answer = self._call(
            "re_encrypt",
            CiphertextBlob=wrapped,
            SourceEncryptionContext=dict(context),
            SourceKeyId=self._wrapping_key(wrapped_by),
            DestinationKeyId=self.key_id,
            DestinationEncryptionContext=dict(context),
        )
        return f"{AWS_KMS}:{answer['KeyId']}", bytes(answer["CiphertextBlob"])


class Pkcs11KeyManager(KeyManager):
    """An AES key on a PKCS#11 token wraps and unwraps (CKM_AES_KEY_WRAP_PAD). One session per
    process, opened on first use (after gunicorn forks), its calls taken one at a time."""

    name = PKCS11

    def __init__(self, *, module: str, token_label: str, pin_file: str, key_label: str) -> None:
        super().__init__()
        missing = [
            name
            for name, value in (
                ("CREDVAULT_PKCS11_MODULE", module),
                ("CREDVAULT_PKCS11_TOKEN_LABEL", token_label),
                ("CREDVAULT_PKCS11_PIN_FILE", pin_file),
                ("CREDVAULT_PKCS11_KEY_LABEL", key_label),
            )
            if not value
        ]
        if missing:
            raise KeyManagerError(f"the pkcs11 key manager needs {', '.join(missing)}")
        self.module, self.token_label = module, token_label
        self.pin_file, self.key_label = pin_file, key_label
        self._lock = threading.Lock()
        self._session: Any = None
        self._key: Any = None

    def current(self) -> str:
        return f"{PKCS11}:{self.token_label}/{self.key_label}"

    def read_pin(self) -> str:
        try:
            pin = Path(self.pin_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyManagerError(
                f"CREDVAULT_PKCS11_PIN_FILE {self.pin_file} cannot be read ({type(exc).__name__})"
            ) from None
        if not pin:
            raise KeyManagerError(f"CREDVAULT_PKCS11_PIN_FILE {self.pin_file} is empty")
        return pin

    def _open(self) -> Any:
        import pkcs11
        from pkcs11 import KeyType
        from pkcs11 import exceptions as errors

        pin = self.read_pin()
        try:
            library = pkcs11.lib(self.module)
        except (RuntimeError, OSError, errors.PKCS11Error) as exc:
            raise KeyManagerError(
                f"CREDVAULT_PKCS11_MODULE {self.module} does not load ({type(exc).__name__})"
            ) from None
        try:
            token = library.get_token(token_label=self.token_label)
        except errors.NoSuchToken:
            raise KeyManagerError(
                f"no PKCS#11 token is labelled {self.token_label!r} (CREDVAULT_PKCS11_TOKEN_LABEL)"
            ) from None
        try:
            session = token.open(user_pin=pin)
        except errors.UserAlreadyLoggedIn:
            # PKCS#11 logs in a process, not a session: one logged in before is this one's.
            session = token.open()
        except errors.PinIncorrect:
            raise KeyManagerError(
                "the PKCS#11 token refused the PIN of CREDVAULT_PKCS11_PIN_FILE"
            ) from None
        except errors.PinLocked:
            raise KeyManagerError("the PKCS#11 token's PIN is locked") from None
        try:
            self._key = session.get_key(label=self.key_label, key_type=KeyType.AES)
        except errors.NoSuchKey:
            session.close()
            raise KeyManagerError(
                f"the token {self.token_label!r} has no AES key labelled {self.key_label!r} "
                "(CREDVAULT_PKCS11_KEY_LABEL)"
            ) from None
        except errors.MultipleObjectsReturned:
            session.close()
            raise KeyManagerError(
                f"the token {self.token_label!r} has more than one key labelled {self.key_label!r}"
            ) from None
        self._session = session
        return self._key

    def _run(self, operation: str, work: Any) -> Any:
        from pkcs11 import exceptions as errors

        self.calls += 1
        with self._lock:
            key = self._key if self._session is not None else self._open()
            try:
                return work(key)
            except (
                errors.DeviceRemoved,
                errors.DeviceError,
                errors.TokenNotPresent,
                errors.SessionClosed,
                errors.SessionHandleInvalid,
            ) as exc:
                self._session = self._key = None  # opened again by the next call
                raise KeyManagerUnreachable(
                    f"the PKCS#11 token did not answer {operation} ({type(exc).__name__})"
                ) from None
            except errors.PKCS11Error as exc:
                raise KeyManagerError(
                    f"the PKCS#11 token refused {operation} with the key {self.key_label!r} "
                    f"({type(exc).__name__})"
                ) from None

    def wrap(self, key: bytes, *, context: Context) -> tuple[str, bytes]:
        from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass

        def work(kek: Any) -> bytes:
            plain = self._session.create_object(
                {
                    Attribute.CLASS: ObjectClass.SECRET_KEY,
                    Attribute.KEY_TYPE: KeyType.AES,
                    Attribute.VALUE: key,
                    Attribute.TOKEN: False,
                    Attribute.EXTRACTABLE: True,
                    Attribute.SENSITIVE: False,
                }
            )
            try:
                return bytes(kek.wrap_key(plain, mechanism=Mechanism.AES_KEY_WRAP_PAD))
            finally:
                plain.destroy()

        return self.current(), self._run("wrap", work)

    def unwrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> bytes:
        from pkcs11 import Attribute

        label = self._label_of(wrapped_by)

        def work(kek: Any) -> bytes:
            plain = self._unwrapped(kek, label, wrapped, readable=True)
            try:
                return bytes(plain[Attribute.VALUE])
            finally:
                plain.destroy()

        return self._run("unwrap", work)

    def rewrap(self, wrapped_by: str, wrapped: bytes, *, context: Context) -> tuple[str, bytes]:
        """One call on the token: the key is unwrapped into a session object by the key that
        wrapped it and wrapped by the current key, never leaving the token in between."""
        from pkcs11 import Mechanism

        label = self._label_of(wrapped_by)

        def work(kek: Any) -> bytes:
            inside = self._unwrapped(kek, label, wrapped, readable=False)
            try:
                return bytes(kek.wrap_key(inside, mechanism=Mechanism.AES_KEY_WRAP_PAD))
            finally:
                inside.destroy()

        return self.current(), self._run("rewrap", work)

    def _unwrapped(self, kek: Any, label: str, wrapped: bytes, *, readable: bool) -> Any:
        """A session object of the key `wrapped` holds, unwrapped by the token's key `label`
        (a key wrapped under an earlier label, before `rotate_keys`, by that key while the
        token holds it); `readable`: its value can be read out, else it can only be wrapped."""
        from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass

        unwrapping = kek if label == self.key_label else self._other_key(label)
        template = {Attribute.EXTRACTABLE: True}
        if readable:
            template[Attribute.SENSITIVE] = False
        return unwrapping.unwrap_key(
            ObjectClass.SECRET_KEY,
            KeyType.AES,
            wrapped,
            mechanism=Mechanism.AES_KEY_WRAP_PAD,
            store=False,
            template=template,
        )

    def _label_of(self, wrapped_by: str) -> str:
        """The label of the token's key that wrapped a key (`pkcs11:TOKEN/LABEL`)."""
        token, _, label = wrapped_by.removeprefix(f"{PKCS11}:").partition("/")
        if not self.owns(wrapped_by) or token != self.token_label or not label:
            raise KeyManagerError(
                f"a data key is wrapped by {wrapped_by!r}, not by a key of the PKCS#11 token "
                f"{self.token_label!r}"
            )
        return label

    def _other_key(self, label: str) -> Any:
        from pkcs11 import KeyType
        from pkcs11 import exceptions as errors

        try:
            return self._session.get_key(label=label, key_type=KeyType.AES)
        except errors.NoSuchKey:
            raise KeyManagerError(
                f"the token {self.token_label!r} no longer has the AES key {label!r} that "
                "wrapped a data key"
            ) from None


@dataclass(frozen=True, slots=True)
class Configuration:
    """The settings a key manager is built from (a key of the per-process cache)."""

    manager: str
    ring: str
    kms_key_id: str
    pkcs11: tuple[str, str, str, str]


def configuration() -> Configuration:
    return Configuration(
        manager=settings.CREDVAULT_KEY_MANAGER,
        ring=settings.CREDVAULT_ENCRYPTION_KEYS,
        kms_key_id=settings.CREDVAULT_KMS_KEY_ID,
        pkcs11=(
            settings.CREDVAULT_PKCS11_MODULE,
            settings.CREDVAULT_PKCS11_TOKEN_LABEL,
            settings.CREDVAULT_PKCS11_PIN_FILE,
            settings.CREDVAULT_PKCS11_KEY_LABEL,
        ),
    )


def build(config: Configuration) -> KeyManager:
    """The key manager `config` names; KeyManagerError when its settings are incomplete."""
    if config.manager == LOCAL:
        try:
            return LocalKeyManager(key_ring())
        except KeyRingError as exc:
            raise KeyManagerError(f"CREDVAULT_ENCRYPTION_KEYS is invalid: {exc}") from None
    if config.manager == AWS_KMS:
        return AwsKmsKeyManager(config.kms_key_id)
    if config.manager == PKCS11:
        module, token, pin_file, key = config.pkcs11
        return Pkcs11KeyManager(module=module, token_label=token, pin_file=pin_file, key_label=key)
    raise KeyManagerError(f"CREDVAULT_KEY_MANAGER must be one of {', '.join(MANAGERS)}")


@lru_cache(maxsize=8)
def _built(config: Configuration) -> KeyManager:
    return build(config)


def key_manager() -> KeyManager:
    """The key manager of the current settings, one per process and configuration."""
    return _built(configuration())


def settings_problem() -> KeyManagerError | None:
    """Why the chosen key manager's settings cannot work (one is missing, the PIN file cannot
    be read), or None; what the manager itself answers is not asked."""
    try:
        manager = key_manager()
        if isinstance(manager, Pkcs11KeyManager):
            manager.read_pin()
    except KeyManagerError as exc:
        return exc
    return None


def ring_expected() -> bool:
    """Whether CREDVAULT_ENCRYPTION_KEYS is to be read: always under `local`, which wraps with
    it; under another manager only when given (the old ring, while `migrate_key_manager`
    moves its keys)."""
    return settings.CREDVAULT_KEY_MANAGER == LOCAL or bool(settings.CREDVAULT_ENCRYPTION_KEYS)


def ring_manager() -> LocalKeyManager | None:
    """The `local` manager of CREDVAULT_ENCRYPTION_KEYS when the ring is given (under another
    manager: the old ring, still given while `migrate_key_manager` moves its keys), else
    None."""
    if not settings.CREDVAULT_ENCRYPTION_KEYS:
        return None
    manager = key_manager()
    if isinstance(manager, LocalKeyManager):
        return manager
    try:
        return _ring_manager(settings.CREDVAULT_ENCRYPTION_KEYS)
    except KeyRingError:
        return None


def calls_made() -> int:
    """The calls this process made so far to the configured key manager and, when it is
    another, to the old ring's (a command's count: the difference before and after)."""
    managers = {id(manager): manager for manager in (key_manager(), ring_manager()) if manager}
    return sum(manager.calls for manager in managers.values())


@lru_cache(maxsize=4)
def _ring_manager(raw: str) -> LocalKeyManager:
    return LocalKeyManager(KeyRing.parse(raw))


def manager_for(wrapped_by: str) -> KeyManager:
    """The manager that unwraps a key wrapped by `wrapped_by`: the configured one, or the old
    ring's for a key still wrapped locally under another manager."""
    manager = key_manager()
    if manager.owns(wrapped_by):
        return manager
    if wrapped_by.startswith(RING_WRAPPED):
        ring = ring_manager()
        if ring is not None:
            return ring
        raise KeyManagerError(
            f"a data key is still wrapped by {wrapped_by!r}: give the old ring in "
            "CREDVAULT_ENCRYPTION_KEYS and run migrate_key_manager"
        )
    return manager
