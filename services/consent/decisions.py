"""A member, or the account's API token, decides an approval: once, and finally.

`approve_call` allows a call once (its one use must come within CREDVAULT_APPROVAL_TTL) or
for N minutes (1 to MAX_ALLOW_MINUTES: the agent's calls matching the same `approve` rule of
the same service go through until then); `deny` refuses it. A decision on an approval that is
decided or expired is ApprovalDecided (409); an id that is not the account's is
ApprovalNotFound (404). Each decision is recorded with who made it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from services import audit
from services.audit import Actor, Operation
from services.consent import waiting
from services.consent.approvals import (
    MAX_ALLOW_MINUTES,
    expire,
    expire_if_due,
    raise_approval_event,
)
from services.exceptions import (
    ApprovalDecided,
    ApprovalNotFound,
    FieldErrorCode,
    InvalidRequest,
    field_error,
)
from services.models import Approval, ApprovalKind, ApprovalStatus
from services.storage.transactions import account_transaction

# The token prefix of the audit events of a member's decisions (the member's email is in the
# event's `member`).
MEMBER_ACTOR = "member"


@dataclass(frozen=True, slots=True)
class Decider:
    """Who decides: a member signed in to the approval page (`member`, their email), or a
    request with the account's API token (`token_prefix`)."""

    account_id: int
    request_id: str
    member: str = ""
    token_prefix: str = ""

    @property
    def actor(self) -> Actor:
        return Actor(
            account_id=self.account_id,
            token_prefix=self.token_prefix or MEMBER_ACTOR,
            request_id=self.request_id,
        )

    @property
    def name(self) -> str:
        """As `decided_by` stores it."""
        return self.member or self.token_prefix


def approval_of(*, account_id: int, approval_id: str) -> Approval:
    """The account's approval or access request `approval_id`, or ApprovalNotFound."""
    approval = Approval.objects.filter(id=approval_id, account_id=account_id).first()
    if approval is None:
        raise ApprovalNotFound()
    return approval


def locked_pending(*, decider: Decider, approval_id: str, kind: ApprovalKind | None) -> Approval:
    """The approval locked for its decision; ApprovalDecided unless it is pending and alive
    (one past its expiry is marked expired first)."""
    approval = (
        Approval.objects.select_for_update()
        .filter(id=approval_id, account_id=decider.account_id)
        .first()
    )
    if approval is None or (kind is not None and approval.kind != kind):
        raise ApprovalNotFound()
    if approval.status == ApprovalStatus.PENDING and approval.expires_at <= timezone.now():
        expire(approval)
        approval.status = ApprovalStatus.EXPIRED
    if approval.status != ApprovalStatus.PENDING:
        raise ApprovalDecided()
    return approval


def check_allow_minutes(allow_for_minutes: int | None) -> None:
    if allow_for_minutes is not None and not 1 <= allow_for_minutes <= MAX_ALLOW_MINUTES:
        raise InvalidRequest(
            errors=[
                field_error(
                    "allowForMinutes",
                    FieldErrorCode.INVALID,
                    f"From 1 to {MAX_ALLOW_MINUTES} minutes.",
                )
            ]
        )


def approve_call(
    *, decider: Decider, approval_id: str, allow_for_minutes: int | None = None
) -> Approval:
    """Allow the call once, or for `allow_for_minutes`."""
    check_allow_minutes(allow_for_minutes)
    expire_if_due(account_id=decider.account_id, approval_id=approval_id)
    with account_transaction(decider.account_id):
        approval = locked_pending(decider=decider, approval_id=approval_id, kind=ApprovalKind.CALL)
        now = timezone.now()
        approval.status = ApprovalStatus.APPROVED
        approval.decided_at = now
        approval.decided_by = decider.name
        if allow_for_minutes is None:
            approval.expires_at = now + timedelta(seconds=settings.CREDVAULT_APPROVAL_TTL)
        else:
            approval.allowed_until = now + timedelta(minutes=allow_for_minutes)
            approval.expires_at = approval.allowed_until
        approval.save(
            update_fields=["status", "decided_at", "decided_by", "expires_at", "allowed_until"]
        )
        record_decision(decider, Operation.APPROVE, approval)
        transaction.on_commit(partial(waiting.decided, approval.id))
    return approval


def deny(*, decider: Decider, approval_id: str) -> Approval:
    """Refuse the call or the access request."""
    expire_if_due(account_id=decider.account_id, approval_id=approval_id)
    with account_transaction(decider.account_id):
        approval = locked_pending(decider=decider, approval_id=approval_id, kind=None)
        approval.status = ApprovalStatus.DENIED
        approval.decided_at = timezone.now()
        approval.decided_by = decider.name
        approval.save(update_fields=["status", "decided_at", "decided_by"])
        access = approval.kind == ApprovalKind.ACCESS
        record_decision(decider, Operation.DENY_ACCESS if access else Operation.DENY, approval)
        transaction.on_commit(partial(waiting.decided, approval.id))
    return approval


def record_decision(decider: Decider, operation: Operation, approval: Approval) -> None:
    """The decision's audit event (its actor names the agent that asked) and webhook event."""
    agent_name = approval.agent.name
    audit.record(
        replace(decider.actor, agent_name=agent_name),
        operation,
        service=approval.service,
        target=approval.id,
        member=decider.member,
    )
    raise_approval_event(approval, agent_name=agent_name)
