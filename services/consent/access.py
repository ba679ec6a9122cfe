"""An agent's request for more access, decided equal or narrower by a person.

An access request asks for grants as PUT /agents takes them (every grant rule checked), with a
reason (1 to MAX_REASON_CHARS characters) and, optionally, for how long (`validForMinutes`, 1
to MAX_VALID_MINUTES); it waits ACCESS_REQUEST_TTL for a decision, and counts against the
agent's MAX_PENDING_PER_AGENT with its call approvals. A member or the account's token
approves it as asked or narrower (`wider_errors`: every granted service asked, its methods,
path prefixes, GraphQL mutations and base within the asked ones, `read` only if asked, and no
longer than asked), or denies it (`decisions.deny`). Approved, each granted grant replaces the
agent's grant of its service, if any, keeping that grant's `approve` rules: a decision never
removes a person's say over a call. The grants expire after the minutes granted, or never.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.utils import timezone

from services import audit
from services.audit import Actor, Operation
from services.broker.paths import prefix_within
from services.broker.redaction import redact
from services.consent.approvals import (
    account_values,
    agent_id_of,
    check_pending_room,
    create_pending,
    expire,
    expire_if_due,
)
from services.consent.decisions import Decider, locked_pending, record_decision
from services.exceptions import (
    ApprovalNotFound,
    FieldErrorCode,
    InvalidRequest,
    field_error,
)
from services.grants import MAX_GRANTS, ApproveRule, Given, GrantSpec, checked_grants
from services.identifiers import service_identifier
from services.models import Approval, ApprovalKind, ApprovalStatus, Grant, GrantAccess
from services.storage.transactions import account_transaction

# How long an access request waits for a decision.
ACCESS_REQUEST_TTL = timedelta(hours=24)
MAX_REASON_CHARS = 500
# An access granted for a time: at most a year (longer: grant it for good, or ask again).
MAX_VALID_MINUTES = 365 * 24 * 60

_WIDER = FieldErrorCode.WIDER_THAN_ASKED


def request_access(
    *, actor: Actor, services: Sequence[Given], reason: str, valid_for_minutes: int | None
) -> Approval:
    """A pending access request of the actor's agent (201 in the API), recorded
    `access_request.created`; InvalidRequest naming every broken rule, TooManyPending when the
    agent already waits on MAX_PENDING_PER_AGENT decisions."""
    agent_id = agent_id_of(actor)
    errors = _reason_errors(reason) + minutes_errors(valid_for_minutes)
    grants = _checked(services, errors)
    check_pending_room(agent_id=agent_id)  # before opening any set
    shown = shown_reason(reason=reason, account_id=actor.account_id)
    return create_pending(
        actor,
        Operation.REQUEST_ACCESS,
        kind=ApprovalKind.ACCESS,
        expires_at=timezone.now() + ACCESS_REQUEST_TTL,
        services=[stored(grant) for grant in grants],
        reason=shown,
        valid_for_minutes=valid_for_minutes,
    )


def access_request_of(*, actor: Actor, approval_id: str) -> Approval:
    """The agent's own access request (a pending one past its expiry marked expired first),
    recorded `access_request.read`; another agent's, a call's approval or an unknown id is
    ApprovalNotFound."""
    if actor.agent_id is None:
        raise ApprovalNotFound()
    approval = Approval.objects.filter(
        id=approval_id, agent_id=actor.agent_id, kind=ApprovalKind.ACCESS
    ).first()
    if approval is None:
        raise ApprovalNotFound()
    if approval.status == ApprovalStatus.PENDING and approval.expires_at <= timezone.now():
        expire(approval)
        approval.refresh_from_db(fields=["status"])
    audit.record(actor, Operation.READ_ACCESS_REQUEST, target=approval.id)
    return approval


def approve_access(
    *,
    decider: Decider,
    approval_id: str,
    services: Sequence[Given] | None = None,
    valid_for_minutes: int | None = None,
) -> Approval:
    """Approve an access request as asked, or narrower (`services`), for `valid_for_minutes`
    (at most as long as asked; absent: as asked) or for good: the agent's grants gain the
    services granted. Wider than asked is InvalidRequest naming each wider field."""
    errors = minutes_errors(valid_for_minutes)
    chosen = None if services is None else _checked(services, errors)
    expire_if_due(account_id=decider.account_id, approval_id=approval_id)
    with account_transaction(decider.account_id):
        approval = locked_pending(
            decider=decider, approval_id=approval_id, kind=ApprovalKind.ACCESS
        )
        asked = asked_grants(approval)
        granted = asked if chosen is None else chosen
        minutes = approval.valid_for_minutes if valid_for_minutes is None else valid_for_minutes
        errors = wider_errors(asked=asked, given=services or [])
        if approval.valid_for_minutes is not None and (minutes or 0) > approval.valid_for_minutes:
            errors.append(field_error("validForMinutes", _WIDER, "Longer than asked."))
        errors += _room_errors(agent_id=approval.agent_id, granted=granted)
        if errors:
            raise InvalidRequest(errors=errors)
        now = timezone.now()
        until = now + timedelta(minutes=minutes) if minutes else None
        kept = dict(
            Grant.objects.filter(agent_id=approval.agent_id).values_list("service", "approve")
        )
        for grant in granted:
            rules = [*kept.get(grant.service, [])]
            rules += [rule.as_json() for rule in grant.approve if rule.as_json() not in rules]
            Grant.objects.update_or_create(
                agent_id=approval.agent_id,
                service=grant.service,
                defaults={
                    "access": grant.access,
                    "methods": list(grant.methods),
                    "paths": list(grant.paths),
                    "base": grant.base,
                    "graphql": list(grant.graphql),
                    "expires_at": until,
                    "approve": rules,
                },
            )
        approval.status = ApprovalStatus.APPROVED
        approval.decided_at = now
        approval.decided_by = decider.name
        approval.granted = [stored(grant) for grant in granted]
        approval.allowed_until = until
        approval.save(
            update_fields=["status", "decided_at", "decided_by", "granted", "allowed_until"]
        )
        record_decision(decider, Operation.APPROVE_ACCESS, approval)
    return approval


def shown_reason(*, reason: str, account_id: int) -> str:
    """The reason as stored and shown: every stored value of the account redacted (an agent
    that reads a value cannot hand it to the page), cut to MAX_REASON_CHARS."""
    redacted = redact(reason.encode(), account_values(account_id=account_id))
    return redacted.decode(errors="replace")[:MAX_REASON_CHARS]


def minutes_errors(valid_for_minutes: int | None) -> list[dict[str, str]]:
    if valid_for_minutes is None or 1 <= valid_for_minutes <= MAX_VALID_MINUTES:
        return []
    message = f"From 1 to {MAX_VALID_MINUTES} minutes."
    return [field_error("validForMinutes", FieldErrorCode.INVALID, message)]


def _reason_errors(reason: str) -> list[dict[str, str]]:
    if not reason:
        return [field_error("reason", FieldErrorCode.TOO_SHORT, "Must not be empty.")]
    if len(reason) > MAX_REASON_CHARS:
        message = f"At most {MAX_REASON_CHARS} characters."
        return [field_error("reason", FieldErrorCode.TOO_LONG, message)]
    if "\x00" in reason:
        return [field_error("reason", FieldErrorCode.INVALID, "Must not contain NUL.")]
    return []


def _checked(services: Sequence[Given], errors: list[dict[str, str]]) -> list[GrantSpec]:
    """The grants checked as PUT /agents checks them, at least one; InvalidRequest naming
    every error, `errors` (of the other members) included."""
    errors = list(errors)
    grants: list[GrantSpec] = []
    try:
        grants = checked_grants(services)
    except InvalidRequest as refused:
        errors += refused.errors or []
    for sent, entry, _ in services:
        if sent.expires_at is not None:
            # How long access lasts is the request's validForMinutes, which a person may shorten.
            message = "An access request's grants last validForMinutes; expiresAt is not taken."
            errors.append(
                field_error(
                    f"{entry}.expiresAt" if entry else "expiresAt", FieldErrorCode.INVALID, message
                )
            )
    if not services:
        errors.append(field_error("services", FieldErrorCode.INVALID_LENGTH, "At least one."))
    if errors:
        raise InvalidRequest(errors=errors)
    return grants


def _room_errors(*, agent_id: int, granted: Sequence[GrantSpec]) -> list[dict[str, str]]:
    held = set(Grant.objects.filter(agent_id=agent_id).values_list("service", flat=True))
    if len(held | {grant.service for grant in granted}) <= MAX_GRANTS:
        return []
    message = f"The agent would hold more than {MAX_GRANTS} grants."
    return [field_error("services", FieldErrorCode.TOO_LONG, message)]


def wider_errors(*, asked: Sequence[GrantSpec], given: Sequence[Given]) -> list[dict[str, str]]:
    """Where the grants `given` by a decider are wider than those `asked`, each named by the
    field it came from."""
    by_service = {grant.service: grant for grant in asked}
    errors = []
    for sent, entry, service_field in given:
        where = f"{entry}." if entry else ""
        grant = sent.normalized()
        wanted = by_service.get(service_identifier(grant.service))
        if wanted is None:
            errors.append(
                field_error(service_field or entry, _WIDER, "Not a service the agent asked for.")
            )
            continue
        if grant.access == GrantAccess.READ and wanted.access != GrantAccess.READ:
            errors.append(field_error(f"{where}access", _WIDER, "The read was not asked for."))
        if not set(grant.methods) <= set(wanted.methods):
            errors.append(field_error(f"{where}methods", _WIDER, "A method was not asked for."))
        if not all(prefix_within(path, wanted.paths) for path in grant.paths):
            message = "A path prefix lies outside the prefixes asked."
            errors.append(field_error(f"{where}paths", _WIDER, message))
        if wanted.base and grant.base != wanted.base:
            errors.append(field_error(f"{where}base", _WIDER, "Every base, or another one."))
        if not set(grant.graphql) <= set(wanted.graphql):
            message = "A GraphQL mutation was not asked for."
            errors.append(field_error(f"{where}graphql", _WIDER, message))
        if not set(wanted.approve) <= set(grant.approve):
            message = "A rule of calls that need approval, asked for, is left out."
            errors.append(field_error(f"{where}approve", _WIDER, message))
    return errors


def stored(grant: GrantSpec) -> dict[str, Any]:
    """A grant as an access request stores it (`services`, `granted`)."""
    return {
        "service": grant.service,
        "access": grant.access,
        "methods": list(grant.methods),
        "paths": list(grant.paths),
        "base": grant.base,
        "graphql": list(grant.graphql),
        "approve": [rule.as_json() for rule in grant.approve],
    }


def grants_of(entries: Sequence[Mapping[str, Any]]) -> list[GrantSpec]:
    """Stored grants (`stored`) as GrantSpecs."""
    return [
        GrantSpec(
            service=entry["service"],
            access=entry["access"],
            methods=tuple(entry["methods"]),
            paths=tuple(entry["paths"]),
            base=entry["base"],
            graphql=tuple(entry["graphql"]),
            approve=tuple(map(ApproveRule.stored, entry.get("approve", ()))),
        )
        for entry in entries
    ]


def asked_grants(approval: Approval) -> list[GrantSpec]:
    return grants_of(approval.services)
