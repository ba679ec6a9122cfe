"""The account lock order, named once.

Every change of an account is one transaction that takes the account's audit head first
(`queries.lock_audit_head`): the head orders the account's changes, new services included, and
the change's audit event appends under it. Rows the change locks come after it (a service's
row, then its fields), so two changes of one account wait on each other instead of
deadlocking. Re-encryption, which touches several accounts, takes their heads in account
order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import transaction

from services.storage import queries


@contextmanager
def account_transaction(account_id: int) -> Iterator[None]:
    """One transaction of a change of the account, its audit head locked first."""
    with transaction.atomic():
        queries.lock_audit_head(account_id=account_id)
        yield


@contextmanager
def accounts_transaction(account_ids: Iterable[int]) -> Iterator[None]:
    """One transaction of a change of several accounts, their audit heads locked in account
    order first."""
    with transaction.atomic():
        for account_id in sorted(set(account_ids)):
            queries.lock_audit_head(account_id=account_id)
        yield
