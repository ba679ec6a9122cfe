"""The statements every request runs, with fixed SQL: the seam between the business rules and
the database. Plain values and small frozen dataclasses in and out; the SQL text of each
vendor is in `dialects.py`.

The ORM compiles a query anew on each call, which costs more than running these small
indexed statements (docs/performance.md); everything else credvault does goes through the ORM.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from services.models import ApprovalKind, ApprovalStatus
from services.storage.dialects import ACCOUNT_TOKEN as ACCOUNT_TOKEN  # the kinds of token
from services.storage.dialects import AGENT_TOKEN as AGENT_TOKEN
from services.storage.dialects import AUDIT_GIVEN, FieldRow, dialect_for

# The seq an event is rendered with before the database counts it: its canonical text is
# split at `"seq":0` and the database writes the real seq there (`append_event`).
SEQ_PENDING = 0
_SEQ_KEY = '"seq":'
_SEQ_MARK = f"{_SEQ_KEY}{SEQ_PENDING}"


def _db():
    return connections[DEFAULT_DB_ALIAS]


@dataclass(frozen=True, slots=True)
class StoredToken:
    """A bearer token as stored, with its account (and agent): never the token itself."""

    kind: str
    id: int
    prefix: str
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    account_id: int
    account_name: str
    account_active: bool
    # Agent tokens only: the agent's id (None once it is deleted) and its name.
    agent_id: int | None = None
    agent_name: str = ""


def find_token(*, kind: str, digest: str) -> StoredToken | None:
    """The token of `kind` (ACCOUNT_TOKEN, AGENT_TOKEN) with this SHA-256 digest: one indexed
    query joined to its account."""
    db = _db()
    dialect = dialect_for(db)
    with db.cursor() as cursor:
        cursor.execute(dialect.find_token[kind], [digest])
        row = cursor.fetchone()
    if row is None:
        return None
    pk, prefix, last_used, expires, revoked, account_id, name, active, *agent = row
    read = dialect.read_datetime
    return StoredToken(
        kind, pk, prefix, read(last_used), read(expires), read(revoked),
        account_id, name, bool(active), *agent,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ServiceRow:
    service: str
    key_type: str
    connected_at: datetime
    status: str = "connected"


def list_services(*, account_id: int) -> list[ServiceRow]:
    """The account's connected services, by service identifier (the unique index's order)."""
    db = _db()
    dialect = dialect_for(db)
    with db.cursor() as cursor:
        cursor.execute(dialect.list_services, [account_id])
        rows = cursor.fetchall()
    read = dialect.read_datetime
    return [
        ServiceRow(service, key_type, read(at), status) for service, key_type, at, status in rows
    ]


def lock_audit_head(*, account_id: int) -> None:
    """Inside a transaction: lock the account's audit chain head for the rest of it.

    Every transaction that changes an account takes this lock first, before any row it
    changes: one lock order for all writers of an account, so that two of them never wait for
    each other (a replacing store holding a service row while a creating store holds the
    account row and waits on that service row was a deadlock). On PostgreSQL the writers first
    wait in order at the account's gate, then take the row (dialects.py).
    """
    db = _db()
    with db.cursor() as cursor:
        dialect_for(db).lock_head(cursor, account_id)


@dataclass(frozen=True, slots=True)
class LockedService:
    id: int
    generation: int


def lock_service(*, account_id: int, service: str) -> LockedService | None:
    """Inside a transaction: `lock_audit_head`, then the service's row locked and read (None
    when the account has no such service). On PostgreSQL one statement takes both locks."""
    db = _db()
    with db.cursor() as cursor:
        rows = dialect_for(db).find_locked_service(cursor, account_id, service)
    return LockedService(*rows[0]) if rows else None


def insert_fields(*, service_id: int, fields: Sequence[FieldRow]) -> None:
    """A new service's whole set, `fields` of (keyName, key id, ciphertext), in one INSERT."""
    db = _db()
    dialect = dialect_for(db)
    with db.cursor() as cursor:
        cursor.execute(dialect.insert_fields(len(fields)), dialect.field_params(service_id, fields))


def replace_fields(
    *,
    service_id: int,
    generation: int,
    key_type: str,
    connected_at: datetime,
    refresh_by: datetime | None,
    fields: Sequence[FieldRow],
) -> None:
    """Inside the transaction that holds the service row's lock: replace its whole set with
    `fields` (keyName, key id, ciphertext) and move the row to `generation`."""
    db = _db()
    adapt = db.ops.adapt_datetimefield_value
    moved = [generation, key_type, adapt(connected_at), adapt(refresh_by), service_id]
    with db.cursor() as cursor:
        dialect_for(db).write_replacement(cursor, service_id, moved, fields)


@dataclass(frozen=True, slots=True)
class StoredField:
    id: int
    key_name: str
    key_id: str
    ciphertext: bytes


@dataclass(frozen=True, slots=True)
class GrantedSet:
    """What an agent's grant allows (`access`, `methods`, `paths`, the sensitive GraphQL
    mutations it names in `graphql`) and reaches: the stored set, or `fields` empty when
    nothing is."""

    access: str
    methods: tuple[str, ...]
    paths: tuple[str, ...]
    key_type: str | None
    connected_at: datetime | None
    generation: int | None
    status: str | None
    fields: tuple[StoredField, ...]
    # The one base of the service the grant covers (`router`, `host`); "" for every base.
    base: str = ""
    graphql: tuple[str, ...] = ()
    # When the grant expires (None: never), and its rules of calls that need an approval.
    expires_at: datetime | None = None
    approve: tuple[dict[str, Any], ...] = ()


def read_granted_set(*, account_id: int, agent_id: int | None, service: str) -> GrantedSet | None:
    """The agent read: None without a grant; else the fields of one committed store (one
    statement, so never a mix of two stores), none when nothing is stored."""
    db = _db()
    dialect = dialect_for(db)
    with db.cursor() as cursor:
        cursor.execute(dialect.read_granted_set, [account_id, agent_id, service])
        rows = cursor.fetchall()
    if not rows:
        return None
    access, methods, paths, key_type, connected_at, generation, status, base, graphql = rows[0][:9]
    expires_at, approve = rows[0][9:11]
    fields = tuple(StoredField(*row[11:]) for row in rows if row[11] is not None)
    return GrantedSet(
        access,
        tuple(_json_list(methods)),
        tuple(_json_list(paths)),
        key_type,
        dialect.read_datetime(connected_at),
        generation,
        status,
        fields,
        base,
        graphql=tuple(_json_list(graphql)),
        expires_at=dialect.read_datetime(expires_at),
        approve=tuple(_json_list(approve)),
    )


def standing_approvals(
    *, agent_id: int, service: str, now: datetime
) -> list[tuple[str, dict[str, Any]]]:
    """The ids and `approve` rules of the agent's approved calls of `service` allowed for N
    minutes and not yet past them, the latest first: one indexed statement."""
    db = _db()
    params = [
        agent_id,
        ApprovalStatus.APPROVED.value,
        ApprovalKind.CALL.value,
        service,
        db.ops.adapt_datetimefield_value(now),
    ]
    with db.cursor() as cursor:
        cursor.execute(dialect_for(db).standing_approvals, params)
        rows = cursor.fetchall()
    return [(approval_id, json.loads(rule) if isinstance(rule, str | bytes) else rule)
            for approval_id, rule in rows]  # fmt: skip


def _json_list(value: str | bytes | Iterable[Any]) -> list:
    """A JSON column as the cursor gives it: text (Django reads jsonb as text too), or parsed."""
    return json.loads(value) if isinstance(value, str | bytes) else list(value)


def split_at_seq(canonical: str) -> tuple[str, str]:
    """The canonical text around its pending seq: the database writes the seq it counts
    between the two. The first `"seq":0` is the member's (a string holding it is escaped)."""
    before, mark, after = canonical.partition(_SEQ_MARK)
    if not mark:
        raise ValueError("the canonical text holds no pending seq")
    return before + _SEQ_KEY, after


@dataclass(frozen=True, slots=True)
class Appended:
    seq: int
    prev_digest: str
    digest: str


def append_event(*, canonical: str, **columns: object) -> Appended:
    """Insert the account's next audit event and move its chain head, in one statement that
    is atomic by itself; outside a transaction it is queued on SQLite's writers' lock.

    `columns` are the event's given columns (`dialects.AUDIT_GIVEN`); `canonical` is its
    canonical text rendered with seq SEQ_PENDING. The database reads the head, counts the seq
    and hashes it as services/audit.py says.
    """
    before, after = split_at_seq(canonical)
    db = _db()
    dialect = dialect_for(db)
    params = {column: columns[column] for column in AUDIT_GIVEN}
    params["occurred_at"] = db.ops.adapt_datetimefield_value(params["occurred_at"])
    params["canonical_before"], params["canonical_after"] = before, after
    with dialect.single_write(db), db.cursor() as cursor:
        cursor.execute(dialect.append_event, params)
        [(seq, prev_digest, digest)] = cursor.fetchall()  # to the end: the statement completes
    return Appended(seq, prev_digest, digest)


def complete_event(
    *,
    account_id: int,
    seq: int,
    outcome: str,
    status: int,
    upstream_status: int | None,
    completion_mac: str,
) -> None:
    """Write the completion of the account's audit event `seq`, written before its call left
    (the columns outside its chained form): one UPDATE of its row, atomic by itself."""
    db = _db()
    dialect = dialect_for(db)
    params = [outcome, status, upstream_status, completion_mac, account_id, seq]
    with dialect.single_write(db), db.cursor() as cursor:
        cursor.execute(dialect.complete_event, params)


class Outbox:
    """An event's read of the account's subscriptions and its write, on one cursor (`outbox`):
    every change that may raise an event pays for them."""

    def __init__(self, cursor: Any, db: Any) -> None:
        self._cursor = cursor
        self._db = db
        self._dialect = dialect_for(db)

    def subscriptions(self, *, account_id: int) -> list[tuple[str, list[str]]]:
        """The account's enabled webhook endpoints, each with the types it takes (empty:
        every type): one indexed statement."""
        self._cursor.execute(self._dialect.webhook_subscriptions, [account_id])
        # Most endpoints take every type: their empty list is not parsed.
        return [
            (pk, [] if events == "[]" else _json_list(events))
            for pk, events in self._cursor.fetchall()
        ]

    def write(
        self,
        *,
        event_id: str,
        account_id: int,
        type: str,
        data: dict[str, object],
        occurred_at: datetime,
    ) -> None:
        """The event, unpublished (no sequence yet): one INSERT of one row, the whole cost of
        an event to its change."""
        dialect = self._dialect
        params = [
            event_id,
            account_id,
            type,
            self._db.ops.adapt_json_value(data, None),
            dialect.write_datetime(occurred_at),
        ]
        self._cursor.execute(dialect.insert_webhook_event, params)


@contextmanager
def outbox() -> Iterator[Outbox]:
    """Inside the caller's transaction: the outbox, on one cursor."""
    db = _db()
    with db.cursor() as cursor:
        yield Outbox(cursor, db)


def try_publishing_lock() -> bool:
    """Inside the caller's transaction: whether this worker is the one that publishes webhook
    events until it ends (on PostgreSQL an advisory lock; SQLite's writer is alone)."""
    db = _db()
    with db.cursor() as cursor:
        return dialect_for(db).try_publishing_lock(cursor)


def take_webhook_sequences(*, account_id: int, count: int) -> range:
    """Inside the caller's transaction: the account's next `count` event sequences."""
    db = _db()
    with db.cursor() as cursor:
        cursor.execute(dialect_for(db).take_webhook_sequences, [account_id, count])
        last = int(cursor.fetchone()[0])
    return range(last - count + 1, last + 1)
