"""Key rotation: re-seal every sealed value, of every kind, that is not under the key ring's
first key.

Batched and resumable: each batch is its own transaction, and a run picks up whatever is still
under an older key, so an interrupted run is finished by running it again. Each batch takes one
kind (services/sealed.py lists them), locks the audit heads of the accounts it touches, then its
rows and what binds them (a credential field's service; the order a store takes them in), so a
concurrent store waits instead of deadlocking; and records one `keys.reencrypt` event per
account in the same transaction.
"""

from __future__ import annotations

from services import audit
from services.audit import Actor, Operation
from services.crypto import KeyRing, key_ring
from services.sealed import KINDS, SealedKind
from services.storage.transactions import accounts_transaction


def pending_count() -> int:
    """Values of every kind sealed by a key that is not the first."""
    primary = key_ring().primary_id
    return sum(kind.model._default_manager.exclude(key_id=primary).count() for kind in KINDS)


def reencrypt_batch(*, batch_size: int) -> int:
    """Re-seal up to `batch_size` values of one kind under the first key; the number re-sealed
    (0 when none is left of any kind)."""
    ring = key_ring()
    for kind in KINDS:
        done = _reencrypt_kind(kind, ring=ring, batch_size=batch_size)
        if done:
            return done
    return 0


def _reencrypt_kind(kind: SealedKind, *, ring: KeyRing, batch_size: int) -> int:
    candidates = list(
        kind.model._default_manager.exclude(key_id=ring.primary_id)
        .order_by("pk")
        .values_list("pk", kind.account)[:batch_size]
    )
    if not candidates:
        return 0
    accounts = sorted({account_id for _, account_id in candidates})
    with accounts_transaction(accounts):
        rows = list(
            kind.model._default_manager.select_for_update()
            .select_related(*kind.related)
            .filter(pk__in=[pk for pk, _ in candidates])
            .exclude(key_id=ring.primary_id)
            .order_by("pk")
        )
        for row in rows:
            kind.reseal(ring, row)
        kind.model._default_manager.bulk_update(rows, ["key_id", kind.ciphertext])
        for account_id in accounts:
            audit.record(Actor.command(account_id), Operation.REENCRYPT)
    return len(rows)
