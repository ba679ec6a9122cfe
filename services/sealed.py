"""Every kind of sealed value the database holds, in one registry, and the one place a
credential set is sealed and opened.

A sealed value is a `key_id` column beside a ciphertext column (services/crypto.py gives the
format), sealed by its account's data key (services/keys/envelope.py). Re-encryption
(`reencrypt`, `migrate_key_manager`), readiness (`/readyz`) and the system check walk `KINDS`,
so a kind listed here is rotated and watched with the rest; tests/services/test_key_rotation.py
fails for a model with a `key_id` column that is not listed.

Each kind says where a row's value is bound (its `Place`, the associated data): a credential
field to its account, service, keyName and the service's generation; an OAuth client secret to
its account and provider under a keyName no credential set can use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.db.models import Model, QuerySet

from services.crypto import Place, key_ring, seal_value
from services.keys import envelope
from services.keys.data_keys import REFERENCE_HEAD
from services.keys.managers import RING_WRAPPED, ring_expected
from services.masking import Secret
from services.models import CredentialField, DataKey, OAuthClient, WebhookSecret
from services.storage.dialects import FieldRow

# A webhook secret's keyName, beside its endpoint's id (never a service identifier: `wh_`).
WEBHOOK_SECRET_KEY_NAME = "webhook-secret"  # noqa: S105 - a label, not a secret
# The client secret's keyName: keyNames of credential sets are snake case, so no set uses it.
CLIENT_SECRET_KEY_NAME = "oauth-client-secret"  # noqa: S105 - a label, not a secret


def client_secret_place(*, account_id: int, provider: str) -> Place:
    """Where the OAuth client secret of `provider` for an account is bound (generation 0)."""
    return Place(account_id, provider, CLIENT_SECRET_KEY_NAME, 0)


def webhook_secret_place(*, account_id: int, endpoint_id: str) -> Place:
    """Where a signing secret of a webhook endpoint is bound (generation 0)."""
    return Place(account_id, endpoint_id, WEBHOOK_SECRET_KEY_NAME, 0)


def _credential_field_place(field: CredentialField) -> Place:
    service = field.connected_service
    return Place(service.account_id, service.service, field.key_name, service.generation)


def _client_secret_place(client: OAuthClient) -> Place:
    return client_secret_place(account_id=client.account_id, provider=client.provider)


def _webhook_secret_place(secret: WebhookSecret) -> Place:
    return webhook_secret_place(
        account_id=secret.endpoint.account_id, endpoint_id=secret.endpoint_id
    )


@dataclass(frozen=True, slots=True)
class SealedKind:
    """One model's sealed column: its name for people, its account's lookup path, and the
    place a row's value is bound to (reading the relations in `related`)."""

    name: str
    model: type[Model]
    ciphertext: str
    account: str
    place: Callable[[Any], Place]
    related: tuple[str, ...] = ()

    def sealed_by_ring(self) -> QuerySet[Model]:
        """The rows sealed before data keys, directly by a key of the ring."""
        return self.model._default_manager.exclude(key_id__startswith=REFERENCE_HEAD)

    def outside(self, key_ids: frozenset[str] | set[str]) -> QuerySet[Model]:
        """The rows sealed before data keys by a key id not in `key_ids`."""
        return self.sealed_by_ring().exclude(key_id__in=key_ids)

    def open(self, row: Any) -> Secret:
        return envelope.open(
            row.key_id,
            bytes(getattr(row, self.ciphertext)),
            self.place(row),
            field_id=row.pk,
            table=self.model._meta.db_table,
        )


CREDENTIAL_FIELDS = SealedKind(
    name="credential field",
    model=CredentialField,
    ciphertext="ciphertext",
    account="connected_service__account_id",
    place=_credential_field_place,
    related=("connected_service",),
)
OAUTH_CLIENT_SECRETS = SealedKind(
    name="OAuth client secret",
    model=OAuthClient,
    ciphertext="secret_ciphertext",
    account="account_id",
    place=_client_secret_place,
)
WEBHOOK_SECRETS = SealedKind(
    name="webhook secret",
    model=WebhookSecret,
    ciphertext="ciphertext",
    account="endpoint__account_id",
    place=_webhook_secret_place,
    related=("endpoint",),
)
KINDS: tuple[SealedKind, ...] = (CREDENTIAL_FIELDS, OAUTH_CLIENT_SECRETS, WEBHOOK_SECRETS)


def ring_ids() -> frozenset[str]:
    """The key ids of CREDVAULT_ENCRYPTION_KEYS (none when it is not given under another key
    manager); KeyRingError when it is malformed."""
    if not ring_expected():
        return frozenset()
    return key_ring().ids


def outside_ring(key_ids: frozenset[str]) -> dict[str, tuple[int, list[str]]]:
    """Per kind with any: how many values sealed before data keys name key ids not in
    `key_ids`, and those ids; and the data keys wrapped by a ring key not in `key_ids`. One
    probe per kind; the counts are read only where the probe finds some."""
    found = {}
    for kind in KINDS:
        rows = kind.outside(key_ids)
        if rows.exists():
            ids = sorted(set(rows.values_list("key_id", flat=True)))
            found[kind.name] = (rows.count(), ids)
    # Data keys the ring wraps are sealed by a ring key too: one it must still hold.
    keys = DataKey.objects.filter(wrapped_by__startswith=RING_WRAPPED).exclude(
        wrapped_by__in=[f"{RING_WRAPPED}{key_id}" for key_id in key_ids]
    )
    if keys.exists():
        ids = sorted(
            {by.removeprefix(RING_WRAPPED) for by in keys.values_list("wrapped_by", flat=True)}
        )
        found["data key"] = (keys.count(), ids)
    return found


class OpenedSet:
    """A credential set's values in the clear, each masked: (keyName, value) pairs in order, as
    opened from storage or as given to be sealed. Immutable; its repr names the keyNames only.
    Iterating yields the pairs; `by_name` is the values by keyName, built on first use."""

    __slots__ = ("_by_name", "_pairs")

    def __init__(self, pairs: Iterable[tuple[str, Secret]] = ()) -> None:
        self._pairs = tuple(pairs)
        self._by_name: dict[str, Secret] | None = None

    def __iter__(self) -> Iterator[tuple[str, Secret]]:
        return iter(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return f"OpenedSet(key_names={self.names!r})"

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._pairs]

    @property
    def by_name(self) -> Mapping[str, Secret]:
        if self._by_name is None:
            self._by_name = dict(self._pairs)
        return self._by_name

    def plus(self, pairs: Iterable[tuple[str, Secret]]) -> OpenedSet:
        """This set with `pairs` after its own."""
        return OpenedSet((*self._pairs, *pairs))


class SealedField(Protocol):
    """A stored field as the storage seam reads it, or as the ORM does (read-only here)."""

    @property
    def id(self) -> int: ...
    @property
    def key_name(self) -> str: ...
    @property
    def key_id(self) -> str: ...
    @property
    def ciphertext(self) -> bytes | memoryview: ...


def seal_set(
    *, account_id: int, service: str, generation: int, fields: OpenedSet
) -> list[FieldRow]:
    """A set's values sealed for its place: (keyName, key id, ciphertext) each, all by the
    account's data key of the moment (asked for once: an account's first set creates it)."""
    reference, cipher = envelope.sealing_key(account_id)
    return [
        (
            key_name,
            reference,
            seal_value(cipher, reference, value, Place(account_id, service, key_name, generation)),
        )
        for key_name, value in fields
    ]


def open_set(
    *, account_id: int, service: str, generation: int, fields: Iterable[SealedField]
) -> OpenedSet:
    """A stored set's values, opened and masked. Nothing opened is kept afterwards; a value
    that does not open raises DecryptionError naming its row."""
    # A list, not a generator: the agent read and the brokered call build one each.
    return OpenedSet(
        [
            (
                field.key_name,
                envelope.open(
                    field.key_id,
                    bytes(field.ciphertext),
                    Place(account_id, service, field.key_name, generation),
                    field_id=field.id,
                ),
            )
            for field in fields
        ]
    )
