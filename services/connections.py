"""The business rules of connected services: list, store or replace, remove, test.

Plain functions with keyword-only arguments; every one that writes is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from providers import catalog, verification
from services import audit, sql
from services.crypto import Place, key_ring
from services.exceptions import (
    InvalidRequest,
    InvalidService,
    ServiceLimitReached,
    ServiceNotConnected,
    VerificationFailed,
    field_error,
)
from services.identifiers import InvalidIdentifier, key_type_for, normalize_service
from services.masking import Secret
from services.models import (
    Account,
    AuditAction,
    AuditOutcome,
    ConnectedService,
)


@dataclass(frozen=True)
class CredentialSet:
    """A validated credential set: normalized service, keyType and the values, masked."""

    service: str
    key_type: str
    fields: Sequence[tuple[str, Secret]]

    def __repr__(self) -> str:
        names = [name for name, _ in self.fields]
        return f"CredentialSet(service={self.service!r}, key_names={names!r})"


def service_identifier(raw: str) -> str:
    """Normalize a service identifier from a body or a path, or raise InvalidService."""
    try:
        return normalize_service(raw)
    except InvalidIdentifier:
        raise InvalidService() from None


def credential_set(*, service: str, fields: Sequence[tuple[str, Secret]]) -> CredentialSet:
    """Normalize the service and check the set against the catalog's shapes (CONTRACT 3)."""
    normalized = service_identifier(service)
    names = [name for name, _ in fields]
    provider = catalog.get(normalized)
    if provider is not None:
        match = provider.match(names)
        if match.shape is None:
            errors = [
                field_error(
                    "credentials", "missing_field", f"{provider.name} needs keyName {name!r}"
                )
                for name in match.missing
            ] + [
                field_error(
                    "credentials",
                    "unexpected_field",
                    f"{provider.name} does not take keyName {name!r}",
                )
                for name in match.unexpected
            ]
            raise InvalidRequest(
                f"The credentials do not match a credential shape of {provider.name}.",
                errors=errors,
            )
    return CredentialSet(service=normalized, key_type=key_type_for(names), fields=fields)


@dataclass(frozen=True, slots=True)
class ServiceEntry:
    """One connected service as the list shows it."""

    service: str
    key_type: str
    connected_at: datetime


def list_services(*, account: Account) -> list[ServiceEntry]:
    """The account's connected services, sorted by service identifier (one query on the
    unique (account, service) index; fixed SQL, as it runs on every list)."""
    return [
        ServiceEntry(service, key_type, sql.as_datetime(connected_at))
        for service, key_type, connected_at in sql.fetch(sql.list_services, [account.pk])
    ]


def _store_once(
    *, account: Account, credentials: CredentialSet, context: audit.AuditContext
) -> tuple[ConnectedService, bool]:
    now = timezone.now()
    with transaction.atomic():
        # First the account's audit head: it orders every change of the account, new
        # services included, so the limit holds and no two stores wait on each other. Then
        # the service's row, locked; both in one statement on PostgreSQL.
        head, found = audit.lock_head_reading(
            context, sql.find_service_locking_head, [account.pk, credentials.service]
        )
        created = not found
        if created:
            count = ConnectedService.objects.filter(account=account).count()
            if count >= settings.CREDVAULT_MAX_SERVICES_PER_ACCOUNT:
                raise ServiceLimitReached()
            connected = ConnectedService.objects.create(
                account=account,
                service=credentials.service,
                key_type=credentials.key_type,
                connected_at=now,
                generation=1,
            )
        else:
            # The row is locked (on SQLite the IMMEDIATE transaction holds the write lock), so
            # the generation read above is current.
            service_id, generation = found[0]
            connected = ConnectedService(
                id=service_id,
                account_id=account.pk,
                service=credentials.service,
                key_type=credentials.key_type,
                connected_at=now,
                generation=generation + 1,
            )
        ring = key_ring()
        rows = []
        for key_name, value in credentials.fields:
            place = Place(account.pk, credentials.service, key_name, connected.generation)
            rows.append((key_name, *ring.seal(value, place)))
        if created:
            sql.insert_fields(connected.pk, rows)
        else:
            sql.replace_fields(
                connected.pk,
                generation=connected.generation,
                key_type=connected.key_type,
                connected_at=now,
                rows=rows,
            )
        audit.append(
            head,
            context,
            action=AuditAction.SERVICES_STORE,
            outcome=AuditOutcome.SUCCESS,
            status=201 if created else 200,
            service=credentials.service,
        )
    return connected, created


def store_credentials(
    *, account: Account, credentials: CredentialSet, context: audit.AuditContext
) -> tuple[ConnectedService, bool]:
    """Store the complete set, replacing every earlier field of the service atomically.

    Returns the connected service and whether it was newly connected. On any failure the
    earlier set remains untouched. Two concurrent stores leave exactly one of the two sets:
    the service row is locked for the whole replacement, and when both try to connect a new
    service, the loser of the unique constraint retries as a replacement.
    """
    try:
        return _store_once(account=account, credentials=credentials, context=context)
    except IntegrityError:
        return _store_once(account=account, credentials=credentials, context=context)


def store_verified_credentials(
    *, account: Account, credentials: CredentialSet, context: audit.AuditContext
) -> tuple[ConnectedService, bool]:
    """Verify-on-store: store only what the provider accepts at its check, else raise
    VerificationFailed with the reason and store nothing.

    The provider is asked before the transaction opens, so that no lock is held during the
    network call; the store itself is the same atomic replacement as `store_credentials`.
    """
    verdict = verify_credentials(credentials=credentials)
    if not verdict.verified:
        raise VerificationFailed(verdict.reason.value)
    return store_credentials(account=account, credentials=credentials, context=context)


def remove_service(*, account: Account, service: str, context: audit.AuditContext) -> None:
    """Delete every field of the service at once, or raise ServiceNotConnected. From the
    commit on, no agent read finds any of them."""
    with transaction.atomic():
        head = audit.lock_head(context)
        deleted, _ = ConnectedService.objects.filter(account=account, service=service).delete()
        if not deleted:
            raise ServiceNotConnected()
        audit.append(
            head,
            context,
            action=AuditAction.SERVICES_REMOVE,
            outcome=AuditOutcome.SUCCESS,
            status=204,
            service=service,
        )


def verify_credentials(*, credentials: CredentialSet) -> verification.Verdict:
    """Ask the provider's server-owned check; nothing is stored and nothing written."""
    return verification.verify(credentials.service, dict(credentials.fields))
