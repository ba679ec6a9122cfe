"""Audit events, hash-chained per account: `record`, `verify_chain`, and the `Operation` table
of which action and status each operation records (the outcome follows: `outcome_for`).

    digest = SHA-256( prev_digest + "\\n" + canonical(event) )     # prev_digest "0" * 64 first

`canonical` is the compact JSON object, keys sorted, of account id, seq, occurred_at (RFC 3339,
microseconds, Z), token_prefix, agent_name, action, service, target, outcome, status and
request_id; an agent.proxy event adds method, path and upstream_status, and `via` is a member
only when set, so earlier events keep their digests. The account row holds the chain's head.
`record` lets the database read the head, count the seq and hash as it inserts
(`storage.append_event`), so Python never holds a stale head; a transaction that records takes
the account's head lock first (`storage.transactions.account_transaction`, or
`storage.queries.lock_service` for a store). The chain is also signed at checkpoints
(`services/checkpoints.py`); see docs/agents.md#audit.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from django.db import DatabaseError, transaction
from django.utils import timezone

from services import checkpoints
from services.models import (
    REQUEST_ID_MAX_LENGTH,
    Account,
    AuditAction,
    AuditEvent,
    AuditOutcome,
)
from services.storage import queries
from services.times import rfc3339

# A refusal whose event cannot be written is told here (`record_refusal`).
_log = logging.getLogger("credvault.audit")

GENESIS = "0" * 64
# The actor of changes made with management commands, in place of a token prefix; and of
# changes a staff user makes in the admin (the user's name goes in the request id).
COMMAND_ACTOR = "cli"
STAFF_ACTOR = "admin"
# The OAuth callback: a person's browser, with no token.
BROWSER_ACTOR = "browser"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts, in which request: the account, the token's display prefix, and the agent, if
    an agent's token sent the request."""

    account_id: int
    token_prefix: str
    request_id: str
    agent_id: int | None = None
    agent_name: str = ""

    @classmethod
    def command(cls, account_id: int, *, staff: str = "") -> Actor:
        """A change made with a management command, or by the staff user `staff` in the
        admin (`admin`, with the request id `admin:NAME`)."""
        if staff:
            return cls(
                account_id=account_id,
                token_prefix=STAFF_ACTOR,
                request_id=f"{STAFF_ACTOR}:{staff}"[:REQUEST_ID_MAX_LENGTH],
            )
        return cls(account_id=account_id, token_prefix=COMMAND_ACTOR, request_id=COMMAND_ACTOR)


class Operation(Enum):
    """Every audited operation: the action it records and the status it answers when it
    succeeds. A refused or failed request records its endpoint's action with the status of its
    error (`outcome_for`)."""

    LIST_SERVICES = (AuditAction.SERVICES_LIST, 200)
    TEST_CREDENTIALS = (AuditAction.SERVICES_TEST, 200)
    CONNECT_SERVICE = (AuditAction.SERVICES_STORE, 201)
    REPLACE_CREDENTIALS = (AuditAction.SERVICES_STORE, 200)
    REMOVE_SERVICE = (AuditAction.SERVICES_REMOVE, 204)
    LIST_PROVIDERS = (AuditAction.PROVIDERS_LIST, 200)
    LIST_AGENTS = (AuditAction.AGENTS_LIST, 200)
    CREATE_AGENT = (AuditAction.AGENTS_PUT, 201)
    REPLACE_GRANTS = (AuditAction.AGENTS_PUT, 200)
    DELETE_AGENT = (AuditAction.AGENTS_DELETE, 204)
    ISSUE_AGENT_TOKEN = (AuditAction.AGENT_TOKENS_ISSUE, 201)
    LIST_AGENT_TOKENS = (AuditAction.AGENT_TOKENS_LIST, 200)
    REVOKE_AGENT_TOKEN = (AuditAction.AGENT_TOKENS_REVOKE, 204)
    LIST_AUDIT_EVENTS = (AuditAction.AUDIT_LIST, 200)
    READ_CREDENTIALS = (AuditAction.AGENT_READ, 200)
    # Its status is the provider's, passed back (`record(upstream_status=...)`).
    PROXY_CALL = (AuditAction.AGENT_PROXY, 200)
    # OAuth. A refresh made for an agent's request is recorded with its actor.
    CREATE_OAUTH_CLIENT = (AuditAction.OAUTH_CLIENTS_PUT, 201)
    REPLACE_OAUTH_CLIENT = (AuditAction.OAUTH_CLIENTS_PUT, 200)
    LIST_OAUTH_CLIENTS = (AuditAction.OAUTH_CLIENTS_LIST, 200)
    DELETE_OAUTH_CLIENT = (AuditAction.OAUTH_CLIENTS_DELETE, 204)
    START_CONNECT = (AuditAction.OAUTH_CONNECT, 201)
    FINISH_CONNECT = (AuditAction.OAUTH_CALLBACK, 200)
    REFRESH = (AuditAction.OAUTH_REFRESH, 200)
    # Management commands and the admin: no HTTP answer, so the status an API would give.
    ISSUE_TOKEN = (AuditAction.TOKENS_ISSUE, 201)
    REVOKE_TOKEN = (AuditAction.TOKENS_REVOKE, 204)
    EXPIRE_TOKEN = (AuditAction.TOKENS_EXPIRE, 200)
    DEACTIVATE_ACCOUNT = (AuditAction.ACCOUNTS_DEACTIVATE, 200)
    REACTIVATE_ACCOUNT = (AuditAction.ACCOUNTS_REACTIVATE, 200)
    DELETE_ACCOUNT = (AuditAction.ACCOUNTS_DELETE, 204)
    REENCRYPT = (AuditAction.KEYS_REENCRYPT, 200)
    # Consent (services/consent/): a call's approval asked for, decided, expired or used; an
    # agent's access request made or decided; members added, removed, signed in.
    REQUEST_APPROVAL = (AuditAction.APPROVAL_REQUESTED, 201)
    APPROVE = (AuditAction.APPROVAL_APPROVED, 200)
    DENY = (AuditAction.APPROVAL_DENIED, 200)
    EXPIRE_APPROVAL = (AuditAction.APPROVAL_EXPIRED, 200)
    USE_APPROVAL = (AuditAction.APPROVAL_USED, 200)
    REQUEST_ACCESS = (AuditAction.ACCESS_REQUEST_CREATED, 201)
    APPROVE_ACCESS = (AuditAction.ACCESS_REQUEST_APPROVED, 200)
    DENY_ACCESS = (AuditAction.ACCESS_REQUEST_DENIED, 200)
    EXPIRE_ACCESS = (AuditAction.ACCESS_REQUEST_EXPIRED, 200)
    LIST_APPROVALS = (AuditAction.APPROVALS_LIST, 200)
    READ_ACCESS_REQUEST = (AuditAction.ACCESS_REQUEST_READ, 200)
    CREATE_MEMBER = (AuditAction.MEMBERS_CREATE, 201)
    REMOVE_MEMBER = (AuditAction.MEMBERS_REMOVE, 204)
    MEMBER_SIGN_IN = (AuditAction.MEMBERS_SIGN_IN, 200)
    # Webhook endpoints (services/webhooks/).
    CREATE_WEBHOOK = (AuditAction.WEBHOOKS_CREATE, 201)
    UPDATE_WEBHOOK = (AuditAction.WEBHOOKS_UPDATE, 200)
    ROTATE_WEBHOOK_SECRET = (AuditAction.WEBHOOKS_ROTATE_SECRET, 201)
    DELETE_WEBHOOK = (AuditAction.WEBHOOKS_DELETE, 204)

    @property
    def action(self) -> str:
        return self.value[0]

    @property
    def status(self) -> int:
        return self.value[1]


def outcome_for(status: int) -> AuditOutcome:
    if status < 400:
        return AuditOutcome.SUCCESS
    return AuditOutcome.REFUSED if status < 500 else AuditOutcome.ERROR


def canonical(event: AuditEvent | EventRow) -> str:
    fields = {
        "account": event.account_id,
        "seq": event.seq,
        "occurred_at": rfc3339(event.occurred_at),
        "token_prefix": event.token_prefix,
        "agent_name": event.agent_name,
        "action": event.action,
        "service": event.service,
        "target": event.target,
        "outcome": event.outcome,
        "status": event.status,
        "request_id": event.request_id,
    }
    if event.method:
        fields["method"] = event.method
        fields["path"] = event.path
        fields["upstream_status"] = event.upstream_status
    if event.via:
        fields["via"] = event.via
    if event.member:
        fields["member"] = event.member
    if event.sent_path:
        # Written before the request left: what the call would become was not known then.
        # Its completion is signed on its own (`complete`).
        fields.update(outcome=AuditOutcome.SENT, status=None, upstream_status=None)
        fields["sent_path"] = event.sent_path
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def chain_digest(prev_digest: str, event: AuditEvent) -> str:
    return hashlib.sha256(f"{prev_digest}\n{canonical(event)}".encode()).hexdigest()


def record(
    actor: Actor,
    operation: Operation,
    *,
    status: int | None = None,
    service: str = "",
    target: str = "",
    method: str = "",
    path: str = "",
    upstream_status: int | None = None,
    outcome: AuditOutcome | None = None,
    via: str = "",
    member: str = "",
) -> AuditEvent:
    """Append the event of `actor`'s request: `operation`'s action, with its success status
    or the `status` it was refused or failed with. One statement, atomic by itself; inside a
    transaction it is part of it (the transaction holds the account's head lock).

    A brokered call gives its `method` and `path`, and `upstream_status` when the provider
    answered: its outcome is then `success` whatever that status (the call was made and its
    answer passed back), or the `outcome` of its streamed body (`cut`, `abandoned`); without
    an answer it follows credvault's own status. A brokered call about to leave is recorded
    with `record_sent` instead."""
    status = operation.status if status is None else status
    if outcome is None:
        outcome = AuditOutcome.SUCCESS if upstream_status is not None else outcome_for(status)
    fields = {
        "account_id": actor.account_id,
        "occurred_at": timezone.now(),
        "token_prefix": actor.token_prefix,
        "agent_name": actor.agent_name,
        "action": operation.action,
        "service": service,
        "target": target,
        "outcome": outcome,
        "status": status,
        "request_id": actor.request_id,
        "method": method,
        "path": path,
        "upstream_status": upstream_status,
        "via": via,
        "sent_path": "",
        "completion_mac": "",
        "member": member,
    }
    row = _append(fields)
    return AuditEvent(seq=row.seq, prev_digest=row.prev_digest, digest=row.digest, **fields)


class EventRow:
    """An event's columns as appended, without a model instance (which costs a brokered call,
    whose event is written on every call, about 2% of its instructions)."""

    __slots__ = (
        *("account_id", "occurred_at", "token_prefix", "agent_name", "action", "service"),
        *("target", "outcome", "status", "request_id", "method", "path", "upstream_status"),
        *("via", "sent_path", "completion_mac", "member", "seq", "prev_digest", "digest"),
    )
    # The slots' types, for the type checker (no class attributes: annotations only).
    account_id: int
    occurred_at: datetime
    token_prefix: str
    agent_name: str
    action: str
    service: str
    target: str
    outcome: str
    status: int
    request_id: str
    method: str
    path: str
    upstream_status: int | None
    via: str
    sent_path: str
    completion_mac: str
    member: str
    seq: int
    prev_digest: str
    digest: str

    def __init__(self, **columns: object) -> None:
        for name, value in columns.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"EventRow(account {self.account_id}, seq {self.seq})"


def _append(fields: dict[str, object]) -> EventRow:
    """Append the event of `fields` (its columns but seq and digests) to its account's chain."""
    row = EventRow(seq=queries.SEQ_PENDING, **fields)
    appended = queries.append_event(**fields, canonical=canonical(row))
    row.seq, row.prev_digest, row.digest = appended.seq, appended.prev_digest, appended.digest
    if checkpoints.audit_log.isEnabledFor(logging.INFO):
        line = event_line(row)
        transaction.on_commit(lambda: checkpoints.audit_log.info("%s", line))
    checkpoints.note_event(row.account_id)
    return row


def record_sent(
    actor: Actor,
    *,
    service: str,
    method: str,
    path: str,
    sent_path: str,
    via: str = "",
    target: str = "",
) -> EventRow:
    """Append the event of a brokered call whose request is about to leave (outcome `sent`,
    no status yet), before anything is sent: a worker killed while the provider holds the
    request leaves it behind. `complete` fills in how the call ended."""
    return _append(
        {
            "account_id": actor.account_id,
            "occurred_at": timezone.now(),
            "token_prefix": actor.token_prefix,
            "agent_name": actor.agent_name,
            "action": Operation.PROXY_CALL.action,
            "service": service,
            # The approval the call went under, if it needed one (services/consent/).
            "target": target,
            "outcome": AuditOutcome.SENT,
            "status": 0,
            "request_id": actor.request_id,
            "method": method,
            "path": path,
            "upstream_status": None,
            "via": via,
            "sent_path": sent_path or "/",
            "completion_mac": "",
            "member": "",
        }
    )


def record_refusal(
    actor: Actor,
    operation: Operation,
    *,
    status: int,
    service: str = "",
    target: str = "",
    method: str = "",
    path: str = "",
    via: str = "",
) -> None:
    """The one recorder of a refused or failed request (a view's, an OAuth callback's, a
    brokered call's from the proxy or MCP): its event, or, when the database fails, a log line;
    the refusal stands."""
    try:
        record(
            actor,
            operation,
            status=status,
            service=service,
            target=target,
            method=method,
            path=path,
            via=via,
        )
    except DatabaseError as exc:
        _log.error("audit event not written: %s", type(exc).__name__)


# Set on an exception whose request has its event already (a brokered call that failed after
# its event was written): the view that renders it records no second one.
_RECORDED = "_credvault_audit_recorded"


def mark_recorded(exc: BaseException) -> None:
    setattr(exc, _RECORDED, True)


def is_recorded(exc: BaseException) -> bool:
    """Whether the request that raised `exc` has its audit event already (`mark_recorded`)."""
    return getattr(exc, _RECORDED, False)


def completion_text(event: AuditEvent | EventRow) -> bytes:
    """What a completion's MAC signs: the event's digest (its chained form) and the
    completion."""
    upstream = "" if event.upstream_status is None else str(event.upstream_status)
    return f"{event.digest}\n{event.outcome}\n{event.status}\n{upstream}".encode()


def complete(
    event: AuditEvent | EventRow, *, status: int, upstream_status: int | None, outcome: AuditOutcome
) -> None:
    """Fill in how the call of `event` (written by `record_sent`) ended: its outcome, the
    status the agent got and the provider's status (None when it gave no answer). One UPDATE
    of the event's row, whose chained form does not hold them; they are signed instead
    (`completion_mac`, under the first key of CREDVAULT_AUDIT_KEYS, over the event's digest
    and the completion), so a writer of the database alone can neither change nor move a
    completion; `verify_completions` checks them."""
    event.outcome, event.status, event.upstream_status = outcome, status, upstream_status
    keys = checkpoints.audit_keys()
    event.completion_mac = f"{keys.signing_id}:{keys.mac(keys.signing_id, completion_text(event))}"
    queries.complete_event(
        account_id=event.account_id,
        seq=event.seq,
        outcome=outcome,
        status=status,
        upstream_status=upstream_status,
        completion_mac=event.completion_mac,
    )
    if checkpoints.audit_log.isEnabledFor(logging.INFO):
        checkpoints.audit_log.info("%s", completion_line(event))


def completion_line(event: AuditEvent | EventRow) -> str:
    """A completion as one JSON line for the `credvault.audit` logger, after its event's."""
    upstream = "null" if event.upstream_status is None else event.upstream_status
    return (
        f'{{"type":"audit_completion","account":{event.account_id},"seq":{event.seq},'
        f'"digest":"{event.digest}","outcome":"{event.outcome}","status":{event.status},'
        f'"upstream_status":{upstream},"mac":"{event.completion_mac}"}}'
    )


def event_line(event: AuditEvent | EventRow) -> str:
    """The event as one JSON line for the `credvault.audit` logger: its canonical
    form and its digests, which a SIEM can check against the chain."""
    return (
        f'{{"type":"audit_event","event":{canonical(event)},'
        f'"prev_digest":"{event.prev_digest}","digest":"{event.digest}"}}'
    )


@dataclass(frozen=True)
class Break:
    """The first broken link of a chain: the row after which it no longer holds."""

    account: str
    seq: int
    event_id: int | None
    reason: str

    def __str__(self) -> str:
        row = f"event id {self.event_id}" if self.event_id is not None else "the chain's head"
        return f"account {self.account}: broken at seq {self.seq} ({row}): {self.reason}"


def _events(account: Account) -> Iterator[AuditEvent]:
    return AuditEvent.objects.filter(account=account).order_by("seq").iterator(chunk_size=2000)


def verify_chain(account: Account) -> tuple[int, Break | None]:
    """Check every link of the account's chain: (events checked, first break or None)."""
    previous, expected_seq, count = GENESIS, 1, 0
    for event in _events(account):
        count += 1
        if event.seq != expected_seq:
            return count, Break(
                account.name,
                event.seq,
                event.pk,
                f"expected seq {expected_seq}: an event was deleted or reordered",
            )
        if not hmac.compare_digest(event.prev_digest, previous):
            return count, Break(
                account.name, event.seq, event.pk, "prev_digest does not match the event before"
            )
        if not hmac.compare_digest(event.digest, chain_digest(previous, event)):
            return count, Break(account.name, event.seq, event.pk, "the row was edited")
        previous, expected_seq = event.digest, expected_seq + 1
    if account.audit_seq != expected_seq - 1 or not hmac.compare_digest(
        account.audit_head, previous
    ):
        return count, Break(
            account.name,
            expected_seq,
            None,
            f"the head records seq {account.audit_seq}: events were cut from the end",
        )
    return count, None


def verify_completions(account: Account) -> Break | None:
    """Check the completion of every brokered call written before its request left (with the
    keys of CREDVAULT_AUDIT_KEYS): one not completed holds none (`sent`, no status), and one
    completed holds its MAC over the event's digest and the completion. The first that does
    not, or None."""
    keys = checkpoints.audit_keys()
    events = (
        AuditEvent.objects.filter(account=account)
        .exclude(sent_path="")
        .order_by("seq")
        .iterator(chunk_size=2000)
    )
    for event in events:
        if event.outcome == AuditOutcome.SENT and not event.completion_mac:
            if event.status == 0 and event.upstream_status is None:
                continue
            return Break(account.name, event.seq, event.pk, "a completion without its MAC")
        key_id, _, mac = event.completion_mac.partition(":")
        if key_id not in keys.keys or not hmac.compare_digest(
            mac, keys.mac(key_id, completion_text(event))
        ):
            return Break(
                account.name, event.seq, event.pk, "the completion does not verify: altered"
            )
    return None


def page(*, actor: Actor, limit: int, before: int | None) -> tuple[list[AuditEvent], int | None]:
    """The account's events newest first, below `before` (a seq); and the cursor of the next
    page. A page never shifts while events are added: they are above every cursor. The
    listing's own event is recorded after the page is read."""
    events = AuditEvent.objects.filter(account_id=actor.account_id).order_by("-seq")
    if before is not None:
        events = events.filter(seq__lt=before)
    rows = list(events[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    record(actor, Operation.LIST_AUDIT_EVENTS)
    return rows, (rows[-1].seq if more and rows else None)
