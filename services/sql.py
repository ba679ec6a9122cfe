"""Fixed SQL for the statements every request runs, and the one conversion they need.

The ORM compiles a query anew on each call, which costs more than running these small indexed
statements (measured: see BENCHMARKS.md). The hot ones are therefore written once here, per
database vendor, from the models' metadata: the token lookup, the list of services, the agent
read, the replacement of a set and the audit append. Only quoted table and column names ever
go into the text; every value is bound as a parameter. This module is the only place that
builds SQL text.
"""

from __future__ import annotations

from collections.abc import Callable
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


def adapt_datetime(value: datetime) -> object:
    """A datetime as the default database stores it, for a bound parameter."""
    return connections[DEFAULT_DB_ALIAS].ops.adapt_datetimefield_value(value)


def _per_vendor(build: Callable[[BaseDatabaseWrapper], str]) -> Statement:
    """A statement whose text is built once per database vendor."""
    texts: dict[str, str] = {}

    def statement(db: BaseDatabaseWrapper) -> str:
        text = texts.get(db.vendor)
        if text is None:
            text = texts[db.vendor] = build(db)
        return text

    return statement


def _for_update(db: BaseDatabaseWrapper) -> str:
    return " FOR UPDATE" if db.features.has_select_for_update else ""


# --- tokens ------------------------------------------------------------------------------------

_LOOKUP_COLUMNS = "t.id, t.account_id, t.prefix, t.last_used_at, t.expires_at, t.revoked_at"

account_token = _per_vendor(
    lambda db: (
        f"SELECT {_LOOKUP_COLUMNS}, a.name, a.is_active FROM {table(db, ApiToken)} t "
        f"JOIN {table(db, Account)} a ON a.id = t.account_id WHERE t.digest = %s"
    )
)
agent_token = _per_vendor(
    lambda db: (
        f"SELECT {_LOOKUP_COLUMNS}, a.name, a.is_active, t.agent_id, t.agent_name "
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
find_service = _per_vendor(
    lambda db: (
        f"SELECT id, generation FROM {table(db, ConnectedService)} "
        f"WHERE account_id = %s AND service = %s{_for_update(db)}"
    )
)
clear_fields = _per_vendor(
    lambda db: f"DELETE FROM {table(db, CredentialField)} WHERE connected_service_id = %s"
)
update_service = _per_vendor(
    lambda db: (
        f"UPDATE {table(db, ConnectedService)} SET generation = %s, key_type = %s, "
        "connected_at = %s WHERE id = %s"
    )
)


@lru_cache(maxsize=64)
def insert_fields(count: int) -> Statement:
    """An INSERT of `count` credential fields at once."""
    values = ", ".join(["(%s, %s, %s, %s)"] * count)
    return _per_vendor(
        lambda db: (
            f"INSERT INTO {table(db, CredentialField)} "
            f"(connected_service_id, key_name, key_id, ciphertext) VALUES {values}"
        )
    )


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

AUDIT_COLUMNS = (
    "account_id",
    "seq",
    "occurred_at",
    "token_prefix",
    "agent_name",
    "action",
    "service",
    "target",
    "outcome",
    "status",
    "request_id",
    "prev_digest",
    "digest",
)

lock_audit_head = _per_vendor(
    lambda db: (
        f"SELECT audit_seq, audit_head FROM {table(db, Account)} WHERE id = %s{_for_update(db)}"
    )
)
insert_audit_event = _per_vendor(
    lambda db: (
        f"INSERT INTO {table(db, AuditEvent)} ({', '.join(AUDIT_COLUMNS)}) "
        f"VALUES ({', '.join(['%s'] * len(AUDIT_COLUMNS))})"
    )
)
move_audit_head = _per_vendor(
    lambda db: f"UPDATE {table(db, Account)} SET audit_seq = %s, audit_head = %s WHERE id = %s"
)


# The columns of an event that the caller supplies; the database's append computes the rest.
AUDIT_GIVEN = tuple(c for c in AUDIT_COLUMNS if c not in ("seq", "prev_digest", "digest"))


def hashes_in_database(db: BaseDatabaseWrapper) -> bool:
    """Whether the audit append is one statement that hashes in the database (PostgreSQL,
    whose `sha256()` is built in). SQLite, in-process, runs the three statements."""
    return db.vendor == "postgresql"


# On PostgreSQL, the whole append in one statement, atomic by itself: lock the head, hash,
# insert the event, move the head. The caller binds the account id, the canonical form's text
# before and after the seq (services/audit.py), the account id again, and AUDIT_GIVEN.
# `head` reads the row under its lock, so it is the last committed head even after a wait;
# it is referenced twice, so it runs once and both writes use the same seq and digest.
append_audit_event = _per_vendor(
    lambda db: (
        f"WITH head AS (SELECT audit_seq + 1 AS seq, audit_head AS prev_digest "
        f"FROM {table(db, Account)} WHERE id = %s FOR UPDATE), "
        "event AS (SELECT seq, prev_digest, encode(sha256(convert_to("
        "prev_digest || chr(10) || %s || seq::text || %s, 'UTF8')), 'hex') AS digest "
        "FROM head), "
        f"moved AS (UPDATE {table(db, Account)} SET audit_seq = event.seq, "
        "audit_head = event.digest FROM event WHERE id = %s) "
        f"INSERT INTO {table(db, AuditEvent)} ({', '.join(AUDIT_GIVEN)}, seq, prev_digest, "
        f"digest) SELECT {', '.join(['%s'] * len(AUDIT_GIVEN))}, seq, prev_digest, digest "
        "FROM event RETURNING seq, prev_digest, digest"
    )
)
