"""Sealing stored values again, of every kind, in batches: `reencrypt` (every value under a new
version of its account's data key) and the second step of `migrate_key_manager` (the values
sealed before data keys, directly by a key of the ring, under their account's data key).

Batched and resumable: each batch is its own transaction, and a run picks up whatever is left,
so an interrupted run is finished by running it again. `reencrypt` records its run
(`Reencryption`): a value is done once it is under a version of its account's data key created
since the run started, and the run gives each account one such version, so running it again
after an interruption continues instead of starting over. Each batch takes one kind
(services/sealed.py lists them), locks the audit heads of the accounts it touches, then its
rows and what binds them (a credential field's service; the order a store takes them in), so a
concurrent store waits instead of deadlocking; and records one `keys.reencrypt` event per
account in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.db.models import CharField, Model, QuerySet, Value
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from services import audit
from services.audit import Actor, Operation
from services.crypto import seal_value
from services.keys import data_keys
from services.keys.envelope import with_key_manager
from services.models import DataKey, Reencryption
from services.sealed import KINDS, SealedKind
from services.storage.transactions import accounts_transaction

# Which rows of a kind are still to be sealed again.
Pending = Callable[[SealedKind], QuerySet[Model]]
# The reference and key that seal an account's values in this run.
KeyFor = Callable[[int], tuple[str, AESGCM]]


def _reseal_batch(*, pending: Pending, key_for: KeyFor, batch_size: int) -> int:
    for kind in KINDS:
        done = _reseal_kind(kind, pending=pending, key_for=key_for, batch_size=batch_size)
        if done:
            return done
    return 0


def _key_of(key_for: KeyFor, account_id: int) -> tuple[str, AESGCM]:
    return with_key_manager(partial(key_for, account_id))


def _reseal_kind(kind: SealedKind, *, pending: Pending, key_for: KeyFor, batch_size: int) -> int:
    candidates = list(pending(kind).order_by("pk").values_list("pk", kind.account)[:batch_size])
    if not candidates:
        return 0
    accounts = sorted({account_id for _, account_id in candidates})
    with accounts_transaction(accounts):
        rows = list(
            pending(kind)
            .select_for_update()
            .select_related(*kind.related)
            .filter(pk__in=[pk for pk, _ in candidates])
            .order_by("pk")
        )
        keys = {account_id: _key_of(key_for, account_id) for account_id in accounts}
        for row in rows:
            place = kind.place(row)
            value = kind.open(row)
            reference, cipher = keys[place.account_id]
            row.key_id = reference  # type: ignore[attr-defined]
            setattr(row, kind.ciphertext, seal_value(cipher, reference, value, place))
        kind.model._default_manager.bulk_update(rows, ["key_id", kind.ciphertext])
        for account_id in accounts:
            audit.record(Actor.command(account_id), Operation.REENCRYPT)
    return len(rows)


# --- reencrypt: every value under a new data key -------------------------------------------


def current_run() -> Reencryption:
    """The unfinished run of `reencrypt`, or a new one."""
    run = Reencryption.objects.filter(finished_at__isnull=True).order_by("pk").first()
    return run or Reencryption.objects.create()


def _fresh_references(run: Reencryption) -> QuerySet[Any]:
    references = Concat(
        "key_id", Value("."), Cast("version", CharField()), output_field=CharField()
    )
    return (
        DataKey.objects.filter(created_at__gte=run.started_at, account__isnull=False)
        .annotate(sealed_by=references)
        .values("sealed_by")
    )


def _not_fresh(run: Reencryption) -> Pending:
    return lambda kind: kind.model._default_manager.exclude(key_id__in=_fresh_references(run))


def _fresh_key(run: Reencryption) -> KeyFor:
    def key_for(account_id: int) -> tuple[str, AESGCM]:
        fresh = (
            DataKey.objects.filter(account_id=account_id, created_at__gte=run.started_at)
            .order_by("-version")
            .first()
        )
        if fresh is None:
            fresh, cipher = data_keys.create_version(account_id)
            return fresh.reference, cipher
        return fresh.reference, data_keys.key_of(
            fresh.reference, account_id=account_id, row=f"data key {fresh.reference}"
        )

    return key_for


def reencrypt_pending(run: Reencryption) -> int:
    """Values of every kind not yet under a data key created in `run`."""
    return sum(_not_fresh(run)(kind).count() for kind in KINDS)


def reencrypt_batch(run: Reencryption, *, batch_size: int) -> int:
    """Seal up to `batch_size` values of one kind again under a new data key of their account;
    the number sealed (0 when none is left of any kind)."""
    return _reseal_batch(pending=_not_fresh(run), key_for=_fresh_key(run), batch_size=batch_size)


def finish(run: Reencryption) -> None:
    run.finished_at = timezone.now()
    run.save(update_fields=["finished_at"])


# --- migrate_key_manager: the values sealed before data keys --------------------------------


def ring_sealed_count() -> int:
    """Values of every kind still sealed directly by a key of the ring."""
    return sum(kind.sealed_by_ring().count() for kind in KINDS)


def reseal_ring_batch(*, batch_size: int) -> int:
    """Seal up to `batch_size` values sealed by the ring again under their account's data
    key; the number sealed (0 when none is left)."""
    return _reseal_batch(
        pending=SealedKind.sealed_by_ring, key_for=data_keys.current_key, batch_size=batch_size
    )
