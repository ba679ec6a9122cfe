"""Key rotation: re-seal every value that is not under the key ring's first key.

Batched and resumable: each batch is its own transaction, and a run picks up whatever is still
under an older key, so an interrupted run is finished by running it again. Each batch locks the
audit heads of the accounts it touches, then their services, then the fields (the order a
store takes them in), so a concurrent store of the same service waits instead of
deadlocking; and records one `keys.reencrypt` event per account in the same transaction.
"""

from __future__ import annotations

from django.db import transaction

from services import audit
from services.audit import Actor, Operation
from services.crypto import Place, key_ring
from services.models import ConnectedService, CredentialField
from services.storage import queries


def pending_count() -> int:
    return CredentialField.objects.exclude(key_id=key_ring().primary_id).count()


def reencrypt_batch(*, batch_size: int) -> int:
    """Re-seal up to `batch_size` values under the first key; the number re-sealed."""
    ring = key_ring()
    candidates = list(
        CredentialField.objects.exclude(key_id=ring.primary_id)
        .order_by("pk")
        .values_list("pk", "connected_service_id", "connected_service__account_id")[:batch_size]
    )
    if not candidates:
        return 0
    accounts = sorted({account_id for _, _, account_id in candidates})
    with transaction.atomic():
        for account_id in accounts:
            queries.lock_audit_head(account_id=account_id)
        services = {
            service.pk: service
            for service in ConnectedService.objects.select_for_update()
            .filter(pk__in={service_id for _, service_id, _ in candidates})
            .order_by("pk")
        }
        fields = list(
            CredentialField.objects.filter(pk__in=[pk for pk, _, _ in candidates])
            .exclude(key_id=ring.primary_id)
            .order_by("pk")
        )
        for field in fields:
            service = services[field.connected_service_id]
            place = Place(service.account_id, service.service, field.key_name, service.generation)
            value = ring.open(field.key_id, field.ciphertext, place, field_id=field.pk)
            field.key_id, field.ciphertext = ring.seal(value, place)
        CredentialField.objects.bulk_update(fields, ["key_id", "ciphertext"])
        for account_id in accounts:
            audit.record(Actor.command(account_id), Operation.REENCRYPT)
    return len(fields)
