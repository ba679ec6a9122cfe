"""Deleting an account for good: crypto-shredding.

Every value of an account (credential fields, OAuth client secrets, webhook signing secrets)
is sealed by the account's own data key, stored only wrapped by the key manager
(services/keys/). Deleting the account deletes its values and every version of its data key in
one transaction: a copy of a ciphertext made before (a row copied aside, a value put back into
another account's row) names a data key that no longer exists anywhere in the database, so it
opens with nothing the live database holds. A backup taken before still holds the wrapped key:
it opens while the key-encryption key that wrapped it lives (docs/security.md).

What stays is the account row (inactive, `deleted_at` set, its name taken) with its audit
chain and checkpoints, signed up to the deletion's own event: `verify_audit` still passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from services import audit, checkpoints
from services.accounts import refuse_if_deleted
from services.audit import Actor, Operation
from services.keys import data_keys
from services.members import end_sessions
from services.models import (
    Account,
    Agent,
    AgentToken,
    ApiToken,
    Approval,
    ConnectedService,
    DataKey,
    Member,
    OAuthClient,
    OAuthState,
    WebhookEndpoint,
    WebhookEvent,
    WebhookSequence,
)
from services.sealed import KINDS
from services.storage.transactions import account_transaction


@dataclass(frozen=True, slots=True)
class Deleted:
    """What a deletion removed, counted: sealed values, data key versions, tokens."""

    values: int
    data_keys: int
    tokens: int


def sealed_values(account_id: int) -> int:
    """How many sealed values the account holds, of every sealed kind."""
    return sum(
        kind.model._default_manager.filter(**{kind.account: account_id}).count() for kind in KINDS
    )


def delete_account(*, account: Account, staff: str = "") -> Deleted:
    """Delete everything of the account but the account row and its audit chain, in one
    transaction that records its `accounts.delete` event first (actor `cli`, or the staff user)
    and signs a checkpoint of the chain last: its sealed values with every version of its data
    key, its account and agent tokens, agents and their grants, approvals, members (their
    sessions ended; their users too, unless staff), OAuth clients and connects in progress,
    connected services, webhook endpoints with their secrets and deliveries, and its events.
    The account stays, inactive, with `deleted_at` set and its name taken. After the commit,
    this process forgets the account's unwrapped data keys. A deleted account is refused."""
    pk = account.pk
    with account_transaction(pk):
        account.refresh_from_db(fields=["deleted_at"])
        refuse_if_deleted(account)
        values = sealed_values(pk)
        audit.record(Actor.command(pk, staff=staff), Operation.DELETE_ACCOUNT)
        for member in Member.objects.filter(account_id=pk).select_related("user"):
            user = member.user
            end_sessions(user_id=user.pk)
            member.delete()
            if not (user.is_staff or user.is_superuser):
                user.delete()
        Approval.objects.filter(account_id=pk).delete()
        tokens = ApiToken.objects.filter(account_id=pk).delete()[0]
        tokens += AgentToken.objects.filter(account_id=pk).delete()[0]
        Agent.objects.filter(account_id=pk).delete()
        OAuthState.objects.filter(account_id=pk).delete()
        OAuthClient.objects.filter(account_id=pk).delete()
        ConnectedService.objects.filter(account_id=pk).delete()
        WebhookEndpoint.objects.filter(account_id=pk).delete()
        WebhookEvent.objects.filter(account_id=pk).delete()
        WebhookSequence.objects.filter(account_id=pk).delete()
        keys = DataKey.objects.filter(account_id=pk).delete()[0]
        now = timezone.now()
        Account.objects.filter(pk=pk).update(is_active=False, deleted_at=now)
        # The chain gets no event after this one: sign it now, with the deletion.
        checkpoints.write_checkpoint(account_id=pk)
        transaction.on_commit(lambda: data_keys.cache.forget_account(pk))
    account.is_active, account.deleted_at = False, now
    return Deleted(values=values, data_keys=keys, tokens=tokens)
