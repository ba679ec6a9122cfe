"""Key rotation: re-seal every value that is not under the key ring's first key.

Batched and resumable: each batch is its own transaction, and a run picks up whatever is still
under an older key, so an interrupted run is finished by running it again. Each batch locks the
services it touches before their fields (the order a store takes them in), so a concurrent
store of the same service waits instead of deadlocking.
"""

from __future__ import annotations

from django.db import transaction

from services.crypto import Place, key_ring
from services.models import ConnectedService, CredentialField


def pending_count() -> int:
    return CredentialField.objects.exclude(key_id=key_ring().primary_id).count()


def reencrypt_batch(*, batch_size: int) -> int:
    """Re-seal up to `batch_size` values under the first key; the number re-sealed."""
    ring = key_ring()
    candidates = list(
        CredentialField.objects.exclude(key_id=ring.primary_id)
        .order_by("pk")
        .values_list("pk", "connected_service_id")[:batch_size]
    )
    if not candidates:
        return 0
    with transaction.atomic():
        services = {
            service.pk: service
            for service in ConnectedService.objects.select_for_update()
            .filter(pk__in={service_id for _, service_id in candidates})
            .order_by("pk")
        }
        fields = list(
            CredentialField.objects.filter(pk__in=[pk for pk, _ in candidates])
            .exclude(key_id=ring.primary_id)
            .order_by("pk")
        )
        for field in fields:
            service = services[field.connected_service_id]
            place = Place(service.account_id, service.service, field.key_name, service.generation)
            row = f"credential field {field.pk} ({service.service}/{field.key_name})"
            value = ring.open(field.key_id, field.ciphertext, place, row=row)
            field.key_id, field.ciphertext = ring.seal(value, place)
        CredentialField.objects.bulk_update(fields, ["key_id", "ciphertext"])
    return len(fields)
