"""The business rules of connected services: list, store or replace, remove, test.

Plain functions with keyword-only arguments. Each records its audit event as it succeeds
(`audit.record`); every one that writes is one transaction, its event included.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from providers import catalog, listing, verification
from providers.identifiers import key_type_for
from services import audit
from services.audit import Actor, Operation
from services.exceptions import (
    FieldErrorCode,
    InvalidRequest,
    ServiceLimitReached,
    ServiceNotConnected,
    VerificationFailed,
    field_error,
)
from services.identifiers import service_identifier
from services.models import AuditEvent, ConnectedService
from services.sealed import OpenedSet, seal_set
from services.set_expiry import refresh_by_of
from services.storage import queries
from services.storage.transactions import account_transaction
from services.webhooks import events


@dataclass(frozen=True)
class CredentialSet:
    """A validated credential set: normalized service, keyType and the values, masked."""

    service: str
    key_type: str
    fields: OpenedSet

    def __repr__(self) -> str:
        names = [name for name, _ in self.fields]
        return f"CredentialSet(service={self.service!r}, key_names={names!r})"


def credential_set(*, service: str, fields: OpenedSet) -> CredentialSet:
    """Normalize the service and check the set against the catalog's shapes, and
    the connection's own API host against the catalog's host patterns."""
    normalized = service_identifier(service)
    names = [name for name, _ in fields]
    provider = catalog.get(normalized)
    if provider is not None:
        match = provider.match(names)
        if match.shape is None:
            errors = [
                field_error(
                    "credentials",
                    FieldErrorCode.MISSING_FIELD,
                    f"{provider.name} needs keyName {name!r}",
                )
                for name in match.missing
            ] + [
                field_error(
                    "credentials",
                    FieldErrorCode.UNEXPECTED_FIELD,
                    f"{provider.name} does not take keyName {name!r}",
                )
                for name in match.unexpected
            ]
            raise InvalidRequest(
                f"The credentials do not match a credential shape of {provider.name}.",
                errors=errors,
            )
        _check_api_host(provider, fields)
    return CredentialSet(service=normalized, key_type=key_type_for(names), fields=fields)


def _check_api_host(provider: catalog.Provider, fields: OpenedSet) -> None:
    """A set that names the connection's own API host (Salesforce's `instance_url`) names one
    that matches the catalog's patterns, since calls for the set go there; else 400 naming
    the entry, never echoing the value."""
    api_host = provider.api_host
    if api_host is None:
        return
    for index, (name, value) in enumerate(fields):
        if name == api_host.field and api_host.base_url(value.reveal()) is None:
            message = f"{name} must be {api_host.rule}"
            raise InvalidRequest(
                f"{provider.name}'s {message}.",
                errors=[
                    field_error(f"credentials[{index}].value", FieldErrorCode.INVALID, message)
                ],
            )


# One connected service as the API shows it (service, key_type, connected_at): the row the
# storage seam reads, used as it is.
ServiceEntry = queries.ServiceRow


@dataclass(frozen=True, slots=True)
class Stored:
    """The state a store left, and its audit event (201 when it connected the service)."""

    entry: ServiceEntry
    event: AuditEvent


def list_services(*, actor: Actor) -> list[ServiceEntry]:
    """The account's connected services, sorted by service identifier (one query on the
    unique (account, service) index)."""
    rows = queries.list_services(account_id=actor.account_id)
    audit.record(actor, Operation.LIST_SERVICES)
    return rows


def _store_once(*, actor: Actor, credentials: CredentialSet) -> Stored:
    account_id, service = actor.account_id, credentials.service
    now = timezone.now()
    refresh_by = refresh_by_of(credentials.fields.by_name)
    with transaction.atomic():
        # The account's audit head first: it orders every change of the account, new
        # services included, so the limit holds and no two stores wait on each other. Then
        # the service's row, locked.
        found = queries.lock_service(account_id=account_id, service=service)
        if found is None:
            count = ConnectedService.objects.filter(account_id=account_id).count()
            if count >= settings.CREDVAULT_MAX_SERVICES_PER_ACCOUNT:
                raise ServiceLimitReached()
            service_id = ConnectedService.objects.create(
                account_id=account_id,
                service=service,
                key_type=credentials.key_type,
                connected_at=now,
                generation=1,
                refresh_by=refresh_by,
            ).pk
            generation = 1
        else:
            # The row is locked, so the generation read is current.
            service_id, generation = found.id, found.generation + 1
        fields = seal_set(
            account_id=account_id, service=service, generation=generation, fields=credentials.fields
        )
        if found is None:
            queries.insert_fields(service_id=service_id, fields=fields)
        else:
            queries.replace_fields(
                service_id=service_id,
                generation=generation,
                key_type=credentials.key_type,
                connected_at=now,
                refresh_by=refresh_by,
                fields=fields,
            )
        operation = Operation.CONNECT_SERVICE if found is None else Operation.REPLACE_CREDENTIALS
        event = audit.record(actor, operation, service=service)
        events.raise_event(
            account_id=account_id,
            type=events.CONNECTION_CREATED if found is None else events.CONNECTION_REPLACED,
            data={"service": service, "keyType": credentials.key_type},
        )
    return Stored(ServiceEntry(service, credentials.key_type, now), event)


def store_credentials(*, actor: Actor, credentials: CredentialSet) -> Stored:
    """Store the complete set, replacing every earlier field of the service atomically.

    On any failure the earlier set remains untouched. Two concurrent stores leave exactly one
    of the two sets: the service row is locked for the whole replacement, and when both try to
    connect a new service, the loser of the unique constraint retries as a replacement.
    """
    try:
        return _store_once(actor=actor, credentials=credentials)
    except IntegrityError:
        return _store_once(actor=actor, credentials=credentials)


def store_verified_credentials(*, actor: Actor, credentials: CredentialSet) -> Stored:
    """Verify-on-store: store only what the provider accepts at its check, else raise
    VerificationFailed with the reason and store nothing.

    The provider is asked before the transaction opens, so that no lock is held during the
    network call; the store itself is the same atomic replacement as `store_credentials`.
    """
    verdict = _ask_provider(credentials)
    _raise_verdict(actor, credentials.service, verdict)
    if not verdict.verified:
        raise VerificationFailed(verdict.reason.value)
    return store_credentials(actor=actor, credentials=credentials)


def remove_service(*, actor: Actor, service: str) -> AuditEvent:
    """Delete every field of the service at once, or raise ServiceNotConnected. From the
    commit on, no agent read finds any of them."""
    service = service_identifier(service)
    with account_transaction(actor.account_id):
        deleted, _ = ConnectedService.objects.filter(
            account_id=actor.account_id, service=service
        ).delete()
        if not deleted:
            raise ServiceNotConnected()
        event = audit.record(actor, Operation.REMOVE_SERVICE, service=service)
        events.raise_event(
            account_id=actor.account_id, type=events.CONNECTION_REMOVED, data={"service": service}
        )
        return event


def _ask_provider(credentials: CredentialSet) -> verification.Verdict:
    """The provider's check of the set."""
    return verification.verify(credentials.service, dict(credentials.fields))


def verify_credentials(*, actor: Actor, credentials: CredentialSet) -> verification.Verdict:
    """The test operation: ask the provider's server-owned check; nothing is stored."""
    verdict = _ask_provider(credentials)
    audit.record(actor, Operation.TEST_CREDENTIALS, service=credentials.service)
    _raise_verdict(actor, credentials.service, verdict)
    return verdict


def _raise_verdict(actor: Actor, service: str, verdict: verification.Verdict) -> None:
    """The provider's verdict on a set, as `connection.verified` or `.verification_failed`;
    nothing where no check exists."""
    if verdict.reason is verification.Reason.NO_VERIFIER:
        return
    if verdict.verified:
        data: dict[str, object] = {"service": service}
        events.raise_event(account_id=actor.account_id, type=events.CONNECTION_VERIFIED, data=data)
    else:
        data = {"service": service, "reason": verdict.reason.value}
        events.raise_event(
            account_id=actor.account_id, type=events.CONNECTION_VERIFICATION_FAILED, data=data
        )


def list_providers(*, actor: Actor) -> list[dict]:
    """The catalog as clients are shown it: what each provider's connect form needs."""
    providers = listing.describe_all()
    audit.record(actor, Operation.LIST_PROVIDERS)
    return providers
