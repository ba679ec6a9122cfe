"""Wrapping data keys again under the current key-encryption key: `rotate_keys` (a new key of
the ring, a KMS alias moved to a new key, another HSM key) and the first step of
`migrate_key_manager` (from the local ring to a key manager).

The work grows with accounts, not values: a data key is the same key after it is wrapped
again, so no value is touched and the keys in workers' caches stay right. Each key is updated
only if it is still wrapped as it was read, so two runs, or a run beside the server, never
undo each other; a run interrupted is finished by the next.
"""

from __future__ import annotations

from django.db.models import Count
from django.utils import timezone

from services.keys.data_keys import context_of
from services.keys.managers import key_manager, manager_for
from services.models import DataKey


def wrapped_elsewhere(*, current: str, prefix: str = "") -> dict[str, int]:
    """How many data keys each key-encryption key other than `current` wraps (those whose
    `wrapped_by` starts with `prefix`)."""
    rows = (
        DataKey.objects.exclude(wrapped_by=current)
        .filter(wrapped_by__startswith=prefix)
        .values("wrapped_by")
        .annotate(count=Count("pk"))
        .order_by("wrapped_by")
    )
    return {row["wrapped_by"]: row["count"] for row in rows}


def rewrap_batch(*, batch_size: int, prefix: str = "") -> int:
    """Wrap up to `batch_size` data keys not under the current key-encryption key (and whose
    `wrapped_by` starts with `prefix`) again under it; how many (0: none is left)."""
    target = key_manager()
    current = target.current()
    rows = list(
        DataKey.objects.exclude(wrapped_by=current)
        .filter(wrapped_by__startswith=prefix)
        .order_by("pk")[:batch_size]
    )
    for row in rows:
        source = manager_for(row.wrapped_by)
        context = context_of(row)
        if source is target:
            wrapped_by, wrapped = target.rewrap(row.wrapped_by, bytes(row.wrapped), context=context)
        else:
            plain = source.unwrap(row.wrapped_by, bytes(row.wrapped), context=context)
            wrapped_by, wrapped = target.wrap(plain, context=context)
        DataKey.objects.filter(pk=row.pk, wrapped_by=row.wrapped_by).update(
            wrapped=wrapped, wrapped_by=wrapped_by, wrapped_at=timezone.now()
        )
    return len(rows)
