"""A brokered call that a grant's `approve` rule covers goes through only with a person's
approval, bound to exactly that call.

`admit_call` is the one gate: no rule matched, the call goes on; else the agent's standing
"allow for N minutes" of the same rule, or its approved "allow once" of the same request (used
by exactly one call: the use is one conditional UPDATE), lets it through; else the approval of
this request is pending, denied, expired, or asked for now (a new pending approval, at most
MAX_PENDING_PER_AGENT per agent). An approval is bound to the agent and to `call_digest`: the
service, method, path, query and body. What is stored to show the person is the body redacted
of the account's stored values and cut at BODY_SHOWN_BYTES; no value is stored.

The rules of the agent's repeat without `X-Credvault-Approval`: the newest approval of this
request decides, while it lives (pending: `approval_pending`; denied: `approval_denied`;
approved once and unused: the call goes); a pending one past its expiry is answered
`approval_expired` once (and recorded `approval.expired`); an approval that is used, expired
and answered, or denied and past its expiry, asks anew. With the header, the named approval
answers for itself, and one that is not this agent's approval of this request is
`approval_mismatch`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from services import audit
from services.audit import Actor, Operation
from services.broker.paths import ProxyPath, rule_allows
from services.broker.redaction import redact
from services.exceptions import (
    ApprovalDenied,
    ApprovalExpired,
    ApprovalMismatch,
    ApprovalPending,
    ApprovalProblem,
    ApprovalRequired,
    NotGranted,
    TooManyPending,
)
from services.models import Approval, ApprovalKind, ApprovalStatus, ConnectedService
from services.sealed import open_set
from services.storage.queries import standing_approvals
from services.storage.transactions import account_transaction
from services.times import rfc3339
from services.webhooks import events

# An agent's pending approvals and access requests at once: more is 429 too_many_pending.
MAX_PENDING_PER_AGENT = 5
# Of a call's body, what the approval page shows (after redaction).
BODY_SHOWN_BYTES = 4096
# "Allow for N minutes": N from 1 to a day.
MAX_ALLOW_MINUTES = 24 * 60
# The Retry-After of `approval_pending`.
PENDING_RETRY_SECONDS = 5
# The header that names the approval an agent repeats its request under.
APPROVAL_HEADER = "x-credvault-approval"


@dataclass(frozen=True, slots=True)
class AskedCall:
    """The brokered call an approval is about: the service, the method, the path as the agent
    spelled it after the service (its base first), the query string as it came, the body."""

    service: str
    method: str
    path: str
    query: str
    body: bytes

    def __repr__(self) -> str:
        return f"AskedCall({self.service} {self.method} {self.path!r})"


def call_digest(call: AskedCall) -> str:
    """The SHA-256 of what an approval is bound to (the agent is bound by its column)."""
    head = json.dumps([call.service, call.method, call.path, call.query], separators=(",", ":"))
    return hashlib.sha256(
        head.encode() + b"\n" + hashlib.sha256(call.body).hexdigest().encode()
    ).hexdigest()


def matching_rule(
    rules: Sequence[Mapping[str, Any]], *, methods: set[str], path: ProxyPath
) -> dict[str, Any] | None:
    """The first `approve` rule that covers the call (any of its methods: an override counts
    too), or None. A rule without `methods` covers every method, without `paths` every path."""
    for rule in rules:
        if any(rule_allows(rule, method, path) for method in methods):
            return dict(rule)
    return None


def approval_url(approval_id: str) -> str:
    """The page at which a member decides: `{CREDVAULT_PUBLIC_URL}/approvals/{id}`."""
    return f"{settings.CREDVAULT_PUBLIC_URL.rstrip('/')}/approvals/{approval_id}"


def problem(kind: type[ApprovalProblem], approval: Approval, **headers: str) -> ApprovalProblem:
    return kind(
        approval_id=approval.id,
        approval_url=approval_url(approval.id),
        expires_at=rfc3339(approval.expires_at),
        headers=dict(headers) or None,
    )


def admit_call(
    *,
    actor: Actor,
    call: AskedCall,
    rule: Mapping[str, Any],
    named: str = "",
) -> str:
    """Let a call that `rule` covers through, returning the id of the approval it goes under,
    or raise the problem that says why not (nothing sent). `named`: the agent's
    X-Credvault-Approval header."""
    agent_id = agent_id_of(actor)
    now = timezone.now()
    matched = dict(rule)
    for approval_id, its_rule in standing_approvals(
        agent_id=agent_id, service=call.service, now=now
    ):
        if its_rule == matched:
            return approval_id
    digest = call_digest(call)
    if named:
        approval = (
            Approval.objects.filter(id=named, agent_id=agent_id, kind=ApprovalKind.CALL)
            .only(*_SHOWN)
            .first()
        )
        if approval is None or approval.digest != digest:
            raise ApprovalMismatch()
        return _answer(actor, approval, call=call, rule=rule, now=now, named=True)
    approval = (
        Approval.objects.filter(agent_id=agent_id, kind=ApprovalKind.CALL, digest=digest)
        .only(*_SHOWN)
        .order_by("-created_at")
        .first()
    )
    if approval is None:
        return _ask(actor, agent_id, call=call, digest=digest, rule=rule, now=now)
    return _answer(actor, approval, call=call, rule=rule, now=now, named=False)


# The columns the gate reads.
_SHOWN = (
    *("id", "kind", "status", "expires_at", "used_at", "allowed_until", "digest"),
    *("account_id", "agent_id"),
)


def _answer(
    actor: Actor,
    approval: Approval,
    *,
    call: AskedCall,
    rule: Mapping[str, Any],
    now: datetime,
    named: bool,
) -> str:
    """What the approval of this request says of this call."""
    live = approval.expires_at > now
    if approval.status == ApprovalStatus.PENDING:
        if live:
            raise problem(ApprovalPending, approval, **{"Retry-After": str(PENDING_RETRY_SECONDS)})
        expire(approval)
        raise problem(ApprovalExpired, approval)
    if approval.status == ApprovalStatus.APPROVED and approval.allowed_until is None:
        if approval.used_at is None and live and _use(actor, approval, now=now):
            return approval.id
        if named and approval.used_at is None and not live:
            raise problem(ApprovalExpired, approval)
    elif approval.status == ApprovalStatus.DENIED and (live or named):
        raise problem(ApprovalDenied, approval)
    elif approval.status == ApprovalStatus.EXPIRED and named:
        raise problem(ApprovalExpired, approval)
    return _ask(actor, approval.agent_id, call=call, digest=approval.digest, rule=rule, now=now)


def _use(actor: Actor, approval: Approval, *, now: datetime) -> bool:
    """Take an approved "allow once" for this call: exactly one of two racing calls wins."""
    with account_transaction(approval.account_id):
        won = Approval.objects.filter(
            id=approval.id, status=ApprovalStatus.APPROVED, used_at__isnull=True
        ).update(used_at=now)
        if won:
            audit.record(actor, Operation.USE_APPROVAL, target=approval.id)
    return bool(won)


def expire(approval: Approval) -> None:
    """A pending approval past its expiry becomes expired, once, and is recorded so."""
    with account_transaction(approval.account_id):
        changed = Approval.objects.filter(
            id=approval.id, status=ApprovalStatus.PENDING, expires_at__lte=timezone.now()
        ).update(status=ApprovalStatus.EXPIRED)
        if changed:
            operation = (
                Operation.EXPIRE_ACCESS
                if approval.kind == ApprovalKind.ACCESS
                else Operation.EXPIRE_APPROVAL
            )
            audit.record(Actor.command(approval.account_id), operation, target=approval.id)


def expire_if_due(*, account_id: int, approval_id: str) -> None:
    """The account's pending approval `approval_id`, if past its expiry, marked expired in a
    transaction of its own: a decision refused on it (409) does not undo the marking."""
    approval = (
        Approval.objects.filter(
            id=approval_id,
            account_id=account_id,
            status=ApprovalStatus.PENDING,
            expires_at__lte=timezone.now(),
        )
        .only("id", "kind", "account_id")
        .first()
    )
    if approval is not None:
        expire(approval)


def check_pending_room(*, agent_id: int) -> None:
    """TooManyPending when the agent has MAX_PENDING_PER_AGENT live pending approvals and
    access requests already."""
    pending = Approval.objects.filter(
        agent_id=agent_id, status=ApprovalStatus.PENDING, expires_at__gt=timezone.now()
    ).count()
    if pending >= MAX_PENDING_PER_AGENT:
        raise TooManyPending()


def _ask(
    actor: Actor,
    agent_id: int,
    *,
    call: AskedCall,
    digest: str,
    rule: Mapping[str, Any],
    now: datetime,
) -> str:
    """A new pending approval of this call, recorded `approval.requested`: ApprovalRequired."""
    check_pending_room(agent_id=agent_id)  # before opening any set
    values = account_values(account_id=actor.account_id)
    body, cut = shown_body(body=call.body, values=values)
    approval = create_pending(
        actor,
        Operation.REQUEST_APPROVAL,
        kind=ApprovalKind.CALL,
        expires_at=now + timedelta(seconds=settings.CREDVAULT_APPROVAL_TTL),
        service=call.service,
        method=call.method,
        path=call.path,
        query=redact(call.query.encode(), values).decode(errors="replace"),
        body_shown=body,
        body_cut=cut,
        digest=digest,
        rule=dict(rule),
    )
    raise problem(ApprovalRequired, approval)


def create_pending(
    actor: Actor,
    operation: Operation,
    *,
    kind: ApprovalKind,
    expires_at: datetime,
    **asked: Any,
) -> Approval:
    """A new pending approval or access request of the actor's agent, what it asks in `asked`,
    recorded as `operation` (a call's with its service, method and path): the agent's room for
    one more checked again under the account's lock, so that two racing asks cannot both take
    the last one."""
    agent_id = agent_id_of(actor)
    with account_transaction(actor.account_id):
        check_pending_room(agent_id=agent_id)
        approval = Approval.objects.create(
            account_id=actor.account_id,
            agent_id=agent_id,
            kind=kind,
            created_at=timezone.now(),
            expires_at=expires_at,
            **asked,
        )
        audit.record(
            actor,
            operation,
            target=approval.id,
            service=approval.service,
            method=approval.method,
            path=approval.path,
        )
        raise_approval_event(approval, agent_name=actor.agent_name)
    return approval


def raise_approval_event(approval: Approval, *, agent_name: str) -> None:
    """The webhook event of an approval asked for or decided (`approval.*` for a call,
    `access_request.*` for access), in the change's transaction: ids, the agent, the service,
    the status, times and the page's URL; never what the request holds."""
    call = approval.kind == ApprovalKind.CALL
    pending = approval.status == ApprovalStatus.PENDING
    kinds = {
        (True, True): events.APPROVAL_REQUESTED,
        (True, False): events.APPROVAL_DECIDED,
        (False, True): events.ACCESS_REQUEST_CREATED,
        (False, False): events.ACCESS_REQUEST_DECIDED,
    }
    data: dict[str, object] = {
        "approvalId": approval.id,
        "kind": approval.kind,
        "agent": agent_name,
        "status": approval.status,
        "approvalUrl": approval_url(approval.id),
        "expiresAt": rfc3339(approval.expires_at),
    }
    if call:
        data["service"] = approval.service
    if approval.decided_at is not None:
        data["decidedAt"] = rfc3339(approval.decided_at)
    events.raise_event(account_id=approval.account_id, type=kinds[call, pending], data=data)


def agent_id_of(actor: Actor) -> int:
    """The id of the agent whose token acts; NotGranted for any other token (only an agent
    makes brokered calls and asks for access)."""
    if actor.agent_id is None:
        raise NotGranted()
    return actor.agent_id


def shown_body(*, body: bytes, values: list[str]) -> tuple[str, bool]:
    """The body as the approval page shows it: every stored value of the account (`values`)
    redacted, then cut at BODY_SHOWN_BYTES (whether it was cut)."""
    redacted = redact(body, values) if body else b""
    cut = len(redacted) > BODY_SHOWN_BYTES
    return redacted[:BODY_SHOWN_BYTES].decode(errors="replace"), cut


def account_values(*, account_id: int) -> list[str]:
    """Every stored value of the account, opened (to redact what is shown of a request)."""
    values: list[str] = []
    for stored in ConnectedService.objects.filter(account_id=account_id).prefetch_related("fields"):
        opened = open_set(
            account_id=account_id,
            service=stored.service,
            generation=stored.generation,
            fields=stored.fields.all(),
        )
        values += [value.reveal() for _, value in opened]
    return values
