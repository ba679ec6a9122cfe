"""Audit events, hash-chained per account.

Each event stores `prev_digest`, the digest of the account's previous event ("0" * 64 for the
first), and `digest`:

    digest = SHA-256( prev_digest + "\\n" + canonical form of the event )

The canonical form is the compact JSON object, keys sorted, of account id, seq, occurred_at
(RFC 3339, microseconds, Z), token_prefix, agent_name, action, service, target, outcome,
status and request_id. `seq` counts the account's events from 1, and the account row holds
the chain's head (last seq and digest). An edited row no longer matches its digest, a deleted
or reordered row breaks the sequence or the next `prev_digest`, and a row cut from the end no
longer matches the head: `verify_chain` names the first broken link.

A change takes the account row's lock first (`lock_head`) and appends its event inside the
same transaction (`append`), so that a change and its event commit together or not at all.
The database reads the head, counts the seq and computes the digest as it inserts the event
(`sql.append_audit_event`): PostgreSQL's `sha256()`, or the `SHA256()` Django registers on
SQLite connections. The same statement moves the head: in a WITH clause on PostgreSQL, by
a trigger on SQLite (migration 0005). `verify_chain` recomputes every digest here, in Python.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from services import sql
from services.models import Account, AuditEvent
from services.times import rfc3339

GENESIS = "0" * 64
# The actor of changes made with management commands, in place of a token prefix.
COMMAND_ACTOR = "cli"


@dataclass(frozen=True, slots=True)
class AuditContext:
    """Who acts, in which request: the token's display prefix and the agent name, if any."""

    account_id: int
    token_prefix: str
    request_id: str
    agent_name: str = ""

    @classmethod
    def for_command(cls, account_id: int) -> AuditContext:
        """A change made with a management command."""
        return cls(account_id=account_id, token_prefix=COMMAND_ACTOR, request_id=COMMAND_ACTOR)


@dataclass(slots=True)
class NewEvent:
    """An event being appended: the columns of its row, without a model instance (building
    one costs more than the rest of the append's Python)."""

    account_id: int
    seq: int
    occurred_at: datetime
    token_prefix: str
    agent_name: str
    action: str
    service: str
    target: str
    outcome: str
    status: int
    request_id: str
    prev_digest: str
    digest: str = ""


# What `json.dumps` writes for a str (its default `ensure_ascii`).
_json_string = json.encoder.encode_basestring_ascii


def canonical(event: AuditEvent | NewEvent) -> str:
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
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def canonical_around_seq(event: AuditEvent | NewEvent) -> tuple[str, str]:
    """The canonical form's text before and after the seq, for a database that appends once it
    knows the seq: `before + str(seq) + after == canonical(event)`.

    Written out in `canonical`'s key order, each string as `json.dumps` writes it (its ASCII
    escaping): the same text in a fifth of the time of encoding the dict, on every request
    (a property test holds the two forms equal).
    """
    text = _json_string
    before = (
        f'{{"account":{event.account_id:d},"action":{text(event.action)},'
        f'"agent_name":{text(event.agent_name)},'
        f'"occurred_at":{text(rfc3339(event.occurred_at))},"outcome":{text(event.outcome)},'
        f'"request_id":{text(event.request_id)},"seq":'
    )
    after = (
        f',"service":{text(event.service)},"status":{event.status:d},'
        f'"target":{text(event.target)},"token_prefix":{text(event.token_prefix)}}}'
    )
    return before, after


def chain_digest(prev_digest: str, event: AuditEvent | NewEvent) -> str:
    return hashlib.sha256(f"{prev_digest}\n{canonical(event)}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Head:
    """Proof that the transaction holds the lock on the account's chain head."""

    account_id: int


def lock_head(context: AuditContext) -> Head:
    """Lock the account's chain head (its account row) for the rest of the transaction.

    Every transaction that changes something takes this lock first, before any row it
    changes: one lock order for all writers of an account, so that two of them never wait
    for each other (a replacing store holding a service row while a creating store holds the
    account row and waits on that service row was a deadlock). On PostgreSQL that is
    `SELECT ... FOR UPDATE`; on SQLite the IMMEDIATE transaction holds the database's write
    lock already, so no statement is needed.
    """
    if sql.locks_rows():
        sql.fetch(sql.lock_audit_head, [context.account_id])
    return Head(account_id=context.account_id)


def lock_head_reading(
    context: AuditContext, statement: sql.Statement, params: list
) -> tuple[Head, list[tuple]]:
    """`lock_head`, and rows read under the lock in the same round trip: `statement` is one of
    sql.py's that lock the head first where rows are locked (`find_service_locking_head`)."""
    rows = sql.fetch(statement, params)
    return Head(account_id=context.account_id), rows


def new_event(
    context: AuditContext,
    *,
    action: str,
    outcome: str,
    status: int,
    service: str,
    target: str,
) -> NewEvent:
    """The event of `context`'s request, as of now; its seq and both digests are set by the
    database as it appends it (`sql.append_audit_event`)."""
    return NewEvent(
        account_id=context.account_id,
        seq=0,
        occurred_at=timezone.now(),
        token_prefix=context.token_prefix,
        agent_name=context.agent_name,
        action=action,
        service=service,
        target=target,
        outcome=outcome,
        status=status,
        request_id=context.request_id,
        prev_digest="",
    )


def _write(
    context: AuditContext,
    *,
    action: str,
    outcome: str,
    status: int,
    service: str,
    target: str,
) -> NewEvent:
    """Write the account's next event and move its head; the database reads the head, counts
    the seq and hashes (`sql.append_audit_event`), so Python never holds a stale head.

    One statement: on PostgreSQL it takes the head's lock itself; on SQLite the writer holds
    the database, and a trigger moves the head as the event is inserted.
    """
    event = new_event(
        context, action=action, outcome=outcome, status=status, service=service, target=target
    )
    given = {column: getattr(event, column) for column in sql.AUDIT_GIVEN}
    event.seq, event.prev_digest, event.digest = sql.append_audit_event(
        given, *canonical_around_seq(event)
    )
    return event


def append(
    head: Head,
    context: AuditContext,
    *,
    action: str,
    outcome: str,
    status: int,
    service: str = "",
    target: str = "",
) -> NewEvent:
    """Append an event inside the transaction of a change, which holds `head`'s lock."""
    assert head.account_id == context.account_id, "the lock of another account's chain"
    return _write(
        context, action=action, outcome=outcome, status=status, service=service, target=target
    )


def record(
    context: AuditContext,
    *,
    action: str,
    outcome: str,
    status: int,
    service: str = "",
    target: str = "",
) -> NewEvent:
    """Append the event of a request that changes nothing: one statement, atomic by itself,
    queued on SQLite's writers' lock first. Inside a transaction (a test's, say) it is part
    of that transaction, which holds the lock already."""
    with sql.single_write():
        return _write(
            context, action=action, outcome=outcome, status=status, service=service, target=target
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


def page(
    *, account: Account, limit: int, before: int | None
) -> tuple[list[AuditEvent], int | None]:
    """The account's events newest first, below `before` (a seq); and the cursor of the next
    page. A page never shifts while events are added: they are above every cursor."""
    events = AuditEvent.objects.filter(account=account).order_by("-seq")
    if before is not None:
        events = events.filter(seq__lt=before)
    rows = list(events[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].seq if more and rows else None)
