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
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.db import connection, transaction
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


class EventFields(Protocol):
    """What the chain covers: an `AuditEvent` row, or a `NewEvent` about to be written."""

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


def canonical(event: EventFields) -> str:
    return json.dumps(_fields(event, event.seq), sort_keys=True, separators=(",", ":"))


def _fields(event: EventFields, seq: int) -> dict[str, object]:
    return {
        "account": event.account_id,
        "seq": seq,
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


def canonical_around_seq(event: EventFields) -> tuple[str, str]:
    """The canonical form's text before and after the seq, for a database that appends once it
    knows the seq: `before + str(seq) + after == canonical(event)`.

    The key `"seq":` occurs once: keys are unique, and a quote inside a string value is
    always escaped, so no value can hold it.
    """
    text = json.dumps(_fields(event, 0), sort_keys=True, separators=(",", ":"))
    before, _, after = text.partition('"seq":0')
    return before + '"seq":', after


def chain_digest(prev_digest: str, event: EventFields) -> str:
    return hashlib.sha256(f"{prev_digest}\n{canonical(event)}".encode()).hexdigest()


@dataclass(slots=True)
class Head:
    """The locked head of an account's chain: its last seq and digest."""

    account_id: int
    seq: int
    digest: str


def lock_head(context: AuditContext) -> Head:
    """Lock the account's chain head (its account row) for the rest of the transaction.

    Every transaction that changes something takes this lock first, before any row it
    changes: one lock order for all writers of an account, so that two of them never wait
    for each other (a replacing store holding a service row while a creating store holds the
    account row and waits on that service row was a deadlock). On SQLite the IMMEDIATE
    transaction holds the database's write lock already.
    """
    [(seq, digest)] = sql.fetch(sql.lock_audit_head, [context.account_id])
    return Head(account_id=context.account_id, seq=seq, digest=digest)


def _new_event(
    context: AuditContext,
    head: Head,
    action: str,
    outcome: str,
    status: int,
    service: str,
    target: str,
) -> NewEvent:
    return NewEvent(
        account_id=context.account_id,
        seq=head.seq + 1,
        occurred_at=timezone.now(),
        token_prefix=context.token_prefix,
        agent_name=context.agent_name,
        action=action,
        service=service,
        target=target,
        outcome=outcome,
        status=status,
        request_id=context.request_id,
        prev_digest=head.digest,
    )


def _write(event: NewEvent) -> None:
    """Write `event`, the next after the head it was made from, and move the head.

    On PostgreSQL this is one statement that takes the head's lock itself and fills in the
    seq and both digests (`sql.append_audit_event`); elsewhere the head must be locked, and
    the event is hashed here, inserted, and the head moved (two statements).
    """
    if sql.hashes_in_database(connection):
        before, after = canonical_around_seq(event)
        given = [getattr(event, column) for column in sql.AUDIT_GIVEN]
        given[sql.AUDIT_GIVEN.index("occurred_at")] = sql.adapt_datetime(event.occurred_at)
        params = [event.account_id, before, after, event.account_id, *given]
        [(event.seq, event.prev_digest, event.digest)] = sql.fetch(sql.append_audit_event, params)
        return
    event.digest = chain_digest(event.prev_digest, event)
    row = [getattr(event, column) for column in sql.AUDIT_COLUMNS]
    row[sql.AUDIT_COLUMNS.index("occurred_at")] = sql.adapt_datetime(event.occurred_at)
    sql.execute(sql.insert_audit_event, row)
    sql.execute(sql.move_audit_head, [event.seq, event.digest, event.account_id])


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
    """Append an event after the locked `head`, inside the transaction of a change."""
    event = _new_event(context, head, action, outcome, status, service, target)
    _write(event)
    head.seq, head.digest = event.seq, event.digest
    return event


def record(
    context: AuditContext,
    *,
    action: str,
    outcome: str,
    status: int,
    service: str = "",
    target: str = "",
) -> NewEvent:
    """Lock the head and append, for requests that change nothing: on PostgreSQL one
    statement, elsewhere three in a transaction.

    Inside a transaction it takes no savepoint, so a failure here undoes that transaction.
    """
    if sql.hashes_in_database(connection):
        unread = Head(account_id=context.account_id, seq=0, digest="")  # the statement reads it
        event = _new_event(context, unread, action, outcome, status, service, target)
        _write(event)
        return event
    with transaction.atomic(savepoint=False):
        head = lock_head(context)
        return append(
            head,
            context,
            action=action,
            outcome=outcome,
            status=status,
            service=service,
            target=target,
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
