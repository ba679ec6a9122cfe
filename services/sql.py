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

from django.db import connection
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


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def as_datetime(value: datetime | str | None) -> datetime | None:
    """A datetime column as read by a plain cursor: PostgreSQL gives an aware datetime, SQLite
    a naive one (or its text, `YYYY-MM-DD HH:MM:SS[.ffffff]`) holding UTC, as Django stores it
    with USE_TZ."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def fetch(statement: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def execute(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _per_vendor(build: Callable[[], str]) -> Callable[[], str]:
    """A statement built once per database vendor (the tests switch vendors between runs)."""
    memo = lru_cache(maxsize=4)(lambda vendor, locking: build())
    return lambda: memo(connection.vendor, connection.features.has_select_for_update)


def _for_update() -> str:
    return " FOR UPDATE" if connection.features.has_select_for_update else ""


# --- tokens ------------------------------------------------------------------------------------

_LOOKUP_COLUMNS = "t.id, t.account_id, t.prefix, t.last_used_at, t.expires_at, t.revoked_at"

account_token = _per_vendor(
    lambda: (
        f"SELECT {_LOOKUP_COLUMNS}, a.name, a.is_active FROM {table(ApiToken)} t "
        f"JOIN {table(Account)} a ON a.id = t.account_id WHERE t.digest = %s"
    )
)
agent_token = _per_vendor(
    lambda: (
        f"SELECT {_LOOKUP_COLUMNS}, a.name, a.is_active, t.agent_id, t.agent_name "
        f"FROM {table(AgentToken)} t JOIN {table(Account)} a ON a.id = t.account_id "
        "WHERE t.digest = %s"
    )
)

# --- connected services ------------------------------------------------------------------------

list_services = _per_vendor(
    lambda: (
        f"SELECT service, key_type, connected_at FROM {table(ConnectedService)} "
        "WHERE account_id = %s ORDER BY service"
    )
)
find_service = _per_vendor(
    lambda: (
        f"SELECT id, generation FROM {table(ConnectedService)} "
        f"WHERE account_id = %s AND service = %s{_for_update()}"
    )
)
clear_fields = _per_vendor(
    lambda: f"DELETE FROM {table(CredentialField)} WHERE connected_service_id = %s"
)
update_service = _per_vendor(
    lambda: (
        f"UPDATE {table(ConnectedService)} SET generation = %s, key_type = %s, "
        "connected_at = %s WHERE id = %s"
    )
)


def insert_fields(count: int) -> str:
    """An INSERT of `count` credential fields at once."""
    values = ", ".join(["(%s, %s, %s, %s)"] * count)
    return (
        f"INSERT INTO {table(CredentialField)} "
        f"(connected_service_id, key_name, key_id, ciphertext) VALUES {values}"
    )


# The agent read: grant, service and fields in one statement. No row: no grant; a row without
# fields: nothing stored; otherwise the fields of one committed store.
agent_read = _per_vendor(
    lambda: (
        "SELECT s.key_type, s.connected_at, s.generation, f.id, f.key_name, f.key_id, "
        f"f.ciphertext FROM {table(Grant)} g "
        f"LEFT JOIN {table(ConnectedService)} s ON s.account_id = %s AND s.service = g.service "
        f"LEFT JOIN {table(CredentialField)} f ON f.connected_service_id = s.id "
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
    lambda: f"SELECT audit_seq, audit_head FROM {table(Account)} WHERE id = %s{_for_update()}"
)
insert_audit_event = _per_vendor(
    lambda: (
        f"INSERT INTO {table(AuditEvent)} ({', '.join(AUDIT_COLUMNS)}) "
        f"VALUES ({', '.join(['%s'] * len(AUDIT_COLUMNS))})"
    )
)
move_audit_head = _per_vendor(
    lambda: f"UPDATE {table(Account)} SET audit_seq = %s, audit_head = %s WHERE id = %s"
)
