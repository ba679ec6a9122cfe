"""Fixed SQL for the statements every request runs, and the one conversion they need.

The ORM compiles a query anew on each call, which costs more than running these small indexed
statements (measured: see BENCHMARKS.md). The hot ones are therefore written once here, per
database vendor, from the models' metadata: the token lookup, the list of services, the agent
read, the replacement of a set and the audit append. Only quoted table and column names ever
go into the text; every value is bound as a parameter. This module is the only place that
builds SQL text, but for the SQLite trigger that moves the audit head (migration 0005) and the
benchmark's hand-built ceiling (scripts/ceiling.py), which is never served by credvault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from services.models import (
    Account,
    AgentToken,
    ApiToken,
    AuditEvent,
    ConnectedService,
    CredentialField,
    Grant,
)

# A statement's text for a connection. Each is built once per database vendor (the tests
# switch vendors between runs) and looked up with the connection in hand: reaching
# `django.db.connection` costs a context-local lookup each time, on every statement.
Statement = Callable[[BaseDatabaseWrapper], str]


def table(db: BaseDatabaseWrapper, model: type[Model]) -> str:
    return db.ops.quote_name(model._meta.db_table)


def as_datetime(value: datetime | str | None) -> datetime | None:
    """A datetime column as read by a plain cursor: PostgreSQL gives an aware datetime, SQLite
    a naive one (or its text, `YYYY-MM-DD HH:MM:SS[.ffffff]`) holding UTC, as Django stores it
    with USE_TZ."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def fetch(statement: Statement, params: list) -> list[tuple]:
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(statement(db), params)
        return cursor.fetchall()


def execute(statement: Statement, params: list) -> None:
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(statement(db), params)


def _per_vendor(build: Callable[[BaseDatabaseWrapper], str]) -> Statement:
    """A statement whose text is built once per database vendor."""
    texts: dict[str, str] = {}

    def statement(db: BaseDatabaseWrapper) -> str:
        text = texts.get(db.vendor)
        if text is None:
            text = texts[db.vendor] = build(db)
        return text

    return statement


# --- tokens ------------------------------------------------------------------------------------

# In the order of the models' fields, as `from_db` takes them (services/api/authentication.py).
_LOOKUP_COLUMNS = "t.id, t.prefix, t.last_used_at, t.expires_at, t.revoked_at, t.account_id"

account_token = _per_vendor(
    lambda db: (
        f"SELECT {_LOOKUP_COLUMNS}, a.name, a.is_active FROM {table(db, ApiToken)} t "
        f"JOIN {table(db, Account)} a ON a.id = t.account_id WHERE t.digest = %s"
    )
)
agent_token = _per_vendor(
    lambda db: (
        f"SELECT {_LOOKUP_COLUMNS}, t.agent_id, t.agent_name, a.name, a.is_active "
        f"FROM {table(db, AgentToken)} t JOIN {table(db, Account)} a ON a.id = t.account_id "
        "WHERE t.digest = %s"
    )
)

# --- connected services ------------------------------------------------------------------------

list_services = _per_vendor(
    lambda db: (
        f"SELECT service, key_type, connected_at FROM {table(db, ConnectedService)} "
        "WHERE account_id = %s ORDER BY service"
    )
)


def _find_service_locking_head(db: BaseDatabaseWrapper) -> str:
    services = table(db, ConnectedService)
    if not _locks_rows(db):
        # SQLite: the IMMEDIATE transaction holds the database's write lock already.
        return f"SELECT id, generation FROM {services} WHERE account_id = %s AND service = %s"
    # The head's lock is taken first: the subquery's value is computed before the services
    # are scanned, and it is the account's row, locked.
    return (
        f"WITH head AS (SELECT id FROM {table(db, Account)} WHERE id = %s FOR UPDATE) "
        f"SELECT id, generation FROM {services} "
        "WHERE account_id = (SELECT id FROM head) AND service = %s FOR UPDATE"
    )


# A store's first statement: the service's row (id, generation), locked, after the lock on the
# account's audit head. On PostgreSQL one statement takes both locks, in that order.
find_service_locking_head = _per_vendor(_find_service_locking_head)


def _field_params(service_id: int, rows: Sequence[tuple[str, str, bytes]]) -> list:
    """The parameters of the fields' VALUES, from (keyName, key id, ciphertext) rows."""
    return [item for name, key_id, blob in rows for item in (service_id, name, key_id, blob)]


def _insert_fields_text(db: BaseDatabaseWrapper, count: int) -> str:
    values = ", ".join(["(%s, %s, %s, %s)"] * count)
    return (
        f"INSERT INTO {table(db, CredentialField)} "
        f"(connected_service_id, key_name, key_id, ciphertext) VALUES {values}"
    )


def _move_service_text(db: BaseDatabaseWrapper) -> str:
    return (
        f"UPDATE {table(db, ConnectedService)} SET generation = %s, key_type = %s, "
        "connected_at = %s WHERE id = %s"
    )


@lru_cache(maxsize=64)
def _insert_fields(count: int) -> Statement:
    return _per_vendor(lambda db: _insert_fields_text(db, count))


def insert_fields(service_id: int, rows: Sequence[tuple[str, str, bytes]]) -> None:
    """A new service's whole set, `rows` (keyName, key id, ciphertext), in one INSERT."""
    execute(_insert_fields(len(rows)), _field_params(service_id, rows))


# A replacement writes over the fields whose keyName stays, rather than deleting and
# inserting them: on PostgreSQL the new row version stays on its page and no index gets an
# entry (a HOT update), where a delete and an insert add an entry to every index of the
# table and leave the old ones for VACUUM; a service replaced hundreds of times a second
# slowed down as they piled up.
_UPSERT = (
    " ON CONFLICT (connected_service_id, key_name) DO UPDATE "
    "SET key_id = excluded.key_id, ciphertext = excluded.ciphertext"
)


@lru_cache(maxsize=64)
def _replace_fields(count: int) -> Statement:
    """PostgreSQL: move the service to its next generation, delete its fields whose keyName
    is not in the new set, write the new set over the others or insert it. The three writes
    touch different rows, so their order does not matter."""
    return _per_vendor(
        lambda db: (
            f"WITH moved AS ({_move_service_text(db)}), "
            f"cleared AS (DELETE FROM {table(db, CredentialField)} "
            "WHERE connected_service_id = %s AND NOT key_name = ANY(%s)) "
            f"{_insert_fields_text(db, count)}{_UPSERT}"
        )
    )


@lru_cache(maxsize=64)
def _clear_other_fields(count: int) -> Statement:
    return _per_vendor(
        lambda db: (
            f"DELETE FROM {table(db, CredentialField)} WHERE connected_service_id = %s "
            f"AND key_name NOT IN ({', '.join(['%s'] * count)})"
        )
    )


@lru_cache(maxsize=64)
def _upsert_fields(count: int) -> Statement:
    return _per_vendor(lambda db: _insert_fields_text(db, count) + _UPSERT)


_move_service = _per_vendor(_move_service_text)


def replace_fields(
    service_id: int,
    *,
    generation: int,
    key_type: str,
    connected_at: datetime,
    rows: Sequence[tuple[str, str, bytes]],
) -> None:
    """Replace a connected service's whole set with `rows` (keyName, key id, ciphertext) and
    move its row to `generation`: one statement where the database runs writes in a WITH
    clause (PostgreSQL), three on SQLite. The caller holds the service row's lock."""
    db = connections[DEFAULT_DB_ALIAS]
    moved = [generation, key_type, db.ops.adapt_datetimefield_value(connected_at), service_id]
    names = [name for name, _, _ in rows]
    values = _field_params(service_id, rows)
    with db.cursor() as cursor:
        if _writes_in_with(db):
            cursor.execute(_replace_fields(len(rows))(db), [*moved, service_id, names, *values])
            return
        cursor.execute(_clear_other_fields(len(rows))(db), [service_id, *names])
        cursor.execute(_move_service(db), moved)
        cursor.execute(_upsert_fields(len(rows))(db), values)


# The agent read: grant, service and fields in one statement. No row: no grant; a row without
# fields: nothing stored; otherwise the fields of one committed store.
agent_read = _per_vendor(
    lambda db: (
        "SELECT s.key_type, s.connected_at, s.generation, f.id, f.key_name, f.key_id, "
        f"f.ciphertext FROM {table(db, Grant)} g "
        f"LEFT JOIN {table(db, ConnectedService)} s ON s.account_id = %s AND s.service = g.service "
        f"LEFT JOIN {table(db, CredentialField)} f ON f.connected_service_id = s.id "
        "WHERE g.agent_id = %s AND g.service = %s ORDER BY f.key_name"
    )
)

# --- the audit chain ---------------------------------------------------------------------------

# The columns of an event that the caller binds by name; the append computes seq and digests.
AUDIT_GIVEN = (
    "account_id",
    "occurred_at",
    "token_prefix",
    "agent_name",
    "action",
    "service",
    "target",
    "outcome",
    "status",
    "request_id",
)
# As they stand in an INSERT's column list, and bound by name in its SELECT.
AUDIT_GIVEN_COLUMNS = ", ".join(AUDIT_GIVEN)
AUDIT_GIVEN_PLACEHOLDERS = ", ".join(f"%({column})s" for column in AUDIT_GIVEN)

# Taken only where rows can be locked (`locks_rows`); SQLite's writer holds the database.
lock_audit_head = _per_vendor(
    lambda db: f"SELECT id FROM {table(db, Account)} WHERE id = %s FOR UPDATE"
)


def locks_rows() -> bool:
    """PostgreSQL locks rows (`SELECT ... FOR UPDATE`); SQLite's IMMEDIATE transaction locks
    the whole database for its writer from the start."""
    return _locks_rows(connections[DEFAULT_DB_ALIAS])


def _locks_rows(db: BaseDatabaseWrapper) -> bool:
    return db.features.has_select_for_update


def single_write() -> AbstractContextManager:
    """Around one write statement outside a transaction: on SQLite it queues on the writers'
    lock, as a transaction does (credvault/sqlite/base.py); PostgreSQL's row locks need
    nothing. Inside a transaction, which holds that lock already, it does nothing."""
    db = connections[DEFAULT_DB_ALIAS]
    writer_lock = getattr(db, "single_write", None)
    return writer_lock() if writer_lock is not None else nullcontext()


def _writes_in_with(db: BaseDatabaseWrapper) -> bool:
    """Whether the database runs writes inside a WITH clause (PostgreSQL does; SQLite does
    not), so that several writes make one statement: `replace_fields`, and the audit append
    (which a trigger makes one statement on SQLite)."""
    return db.vendor == "postgresql"


def append_audit_event(given: dict, canonical_before: str, canonical_after: str) -> tuple:
    """Insert the account's next event and move its head: (seq, prev_digest, digest).

    The database reads the head, counts the seq and hashes:

        digest = sha256(prev_digest || "\\n" || canonical_before || seq || canonical_after)

    `given` holds AUDIT_GIVEN; `canonical_before` and `canonical_after` are the event's
    canonical form around its seq (services/audit.py). One statement, atomic by itself, on
    both databases; outside a transaction, run it inside `single_write()`.
    """
    db = connections[DEFAULT_DB_ALIAS]
    params = append_audit_event_params(db, given, canonical_before, canonical_after)
    with db.cursor() as cursor:
        cursor.execute(_append_audit_event(db), params)
        [(seq, prev_digest, digest)] = cursor.fetchall()
    return seq, prev_digest, digest


def append_audit_event_params(
    db: BaseDatabaseWrapper, given: dict, canonical_before: str, canonical_after: str
) -> dict:
    """The parameters of the append's statement: AUDIT_GIVEN as `db` stores them, and the
    event's canonical form around its seq."""
    return {
        **given,
        "occurred_at": db.ops.adapt_datetimefield_value(given["occurred_at"]),
        "canonical_before": canonical_before,
        "canonical_after": canonical_after,
    }


def append_audit_event_parts(db: BaseDatabaseWrapper) -> tuple[str, str]:
    """PostgreSQL's append as its parts: the WITH clause's queries (`head`, `event`, `moved`:
    read the head under its lock, hash, move the head) and the INSERT of the event that reads
    `event`; AUDIT_GIVEN and the canonical text bound by name. `append_audit_event` runs them
    as one statement; the benchmark's hand-built ceiling (scripts/ceiling.py) joins them to a
    read of its own.

    The `head` query reads the row under its lock, so it is the last committed head even after
    a wait, and it is referenced twice, so it runs once and both writes use the same values.
    """
    event, account = table(db, AuditEvent), table(db, Account)
    queries = (
        f"head AS (SELECT audit_seq + 1 AS seq, audit_head AS prev_digest "
        f"FROM {account} WHERE id = %(account_id)s FOR UPDATE), "
        "event AS (SELECT seq, prev_digest, encode(sha256(convert_to(prev_digest || chr(10) "
        "|| %(canonical_before)s || seq::text || %(canonical_after)s, 'UTF8')), 'hex') "
        "AS digest FROM head), "
        f"moved AS (UPDATE {account} SET audit_seq = event.seq, audit_head = event.digest "
        "FROM event WHERE id = %(account_id)s)"
    )
    insert = (
        f"INSERT INTO {event} ({AUDIT_GIVEN_COLUMNS}, seq, prev_digest, digest) "
        f"SELECT {AUDIT_GIVEN_PLACEHOLDERS}, seq, prev_digest, digest FROM event"
    )
    return queries, insert


def _append_audit_event_text(db: BaseDatabaseWrapper) -> str:
    """The statement of `append_audit_event`, AUDIT_GIVEN and the canonical text bound by name.

    PostgreSQL (`sha256()` is built in) does it all in one statement, atomic by itself
    (`append_audit_event_parts`). SQLite (Django registers SHA256() on every connection) only
    inserts: the trigger of migration 0005 moves the head within the same statement.
    """
    if _writes_in_with(db):
        queries, insert = append_audit_event_parts(db)
        return f"WITH {queries} {insert} RETURNING seq, prev_digest, digest"
    event, account = table(db, AuditEvent), table(db, Account)
    return (
        f"INSERT INTO {event} ({AUDIT_GIVEN_COLUMNS}, seq, prev_digest, digest) "
        f"SELECT {AUDIT_GIVEN_PLACEHOLDERS}, audit_seq + 1, audit_head, "
        "SHA256(audit_head || char(10) || %(canonical_before)s || (audit_seq + 1) "
        "|| %(canonical_after)s) "
        f"FROM {account} WHERE id = %(account_id)s RETURNING seq, prev_digest, digest"
    )


_append_audit_event = _per_vendor(_append_audit_event_text)
