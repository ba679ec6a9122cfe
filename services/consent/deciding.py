"""The account API's view of consent: the account's approvals and access requests listed, and
one approve for either kind.

`list_approvals` marks every pending one past its expiry expired (each recorded once) before it
lists the newest MAX_LISTED, optionally of one status. `approve` takes a call's option
(`allow_for_minutes`) or an access request's (`services`, `valid_for_minutes`): the other
kind's is InvalidRequest naming it.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from services import audit
from services.audit import Actor, Operation
from services.consent.access import approve_access
from services.consent.approvals import expire
from services.consent.decisions import Decider, approval_of, approve_call
from services.exceptions import FieldErrorCode, InvalidRequest, field_error
from services.grants import Given
from services.models import Approval, ApprovalKind, ApprovalStatus

# The newest approvals a listing holds.
MAX_LISTED = 200


def list_approvals(*, actor: Actor, status: str | None = None) -> list[Approval]:
    """The account's approvals and access requests, newest first, at most MAX_LISTED; of one
    `status` when given (another value is InvalidRequest naming `status`)."""
    if status is not None and status not in ApprovalStatus.values:
        message = f"One of {', '.join(ApprovalStatus.values)}."
        raise InvalidRequest(errors=[field_error("status", FieldErrorCode.INVALID, message)])
    due = Approval.objects.filter(
        account_id=actor.account_id,
        status=ApprovalStatus.PENDING,
        expires_at__lte=timezone.now(),
    ).only("id", "kind", "account_id")
    for approval in due:
        expire(approval)
    listed = Approval.objects.filter(account_id=actor.account_id).select_related("agent")
    if status is not None:
        listed = listed.filter(status=status)
    approvals = list(listed.order_by("-created_at", "-id")[:MAX_LISTED])
    audit.record(actor, Operation.LIST_APPROVALS)
    return approvals


def approve(
    *,
    decider: Decider,
    approval_id: str,
    allow_for_minutes: int | None = None,
    services: Sequence[Given] | None = None,
    valid_for_minutes: int | None = None,
) -> Approval:
    """Approve a call (once, or for `allow_for_minutes`) or an access request (as asked, or
    narrower `services`, for `valid_for_minutes`)."""
    kind = approval_of(account_id=decider.account_id, approval_id=approval_id).kind
    if kind == ApprovalKind.CALL:
        _refuse_members(services=services, validForMinutes=valid_for_minutes)
        return approve_call(
            decider=decider, approval_id=approval_id, allow_for_minutes=allow_for_minutes
        )
    _refuse_members(allowForMinutes=allow_for_minutes)
    return approve_access(
        decider=decider,
        approval_id=approval_id,
        services=services,
        valid_for_minutes=valid_for_minutes,
    )


def _refuse_members(**given: object) -> None:
    """InvalidRequest naming each option given that the approval's kind does not take."""
    errors = [
        field_error(name, FieldErrorCode.UNKNOWN_MEMBER, "Not an option of this kind of approval.")
        for name, value in given.items()
        if value is not None
    ]
    if errors:
        raise InvalidRequest(errors=errors)
