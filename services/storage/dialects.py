"""The SQL text of credvault's hot statements, one class per database vendor.

`dialect_for(db)` is the one place that asks which database a connection is on. `Dialect` holds
the statements both vendors run as written; `PostgreSQL` and `SQLite` hold what differs, side
by side: locking an account's audit head (PostgreSQL the account's advisory gate and the row;
SQLite nothing, its IMMEDIATE transaction holds the write lock), finding a service to store
into, replacing a stored set (one statement against three), appending an audit event (one
statement against an INSERT and the trigger of `schema.py`), and a write outside a transaction
(SQLite queues it on the writers' lock, `backends/sqlite`).

Texts are built once per vendor from the models' metadata; only quoted table names go into
them, every value is bound as a parameter.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from functools import lru_cache
from typing import Protocol, cast, overload

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from services.models import (
    Account,
    AgentToken,
    ApiToken,
    Approval,
    AuditEvent,
    ConnectedService,
    CredentialField,
    Grant,
    WebhookEndpoint,
    WebhookEvent,
    WebhookSequence,
)

# The columns of an audit event that the caller gives; the append computes seq and digests.
AUDIT_GIVEN = tuple(
    field.attname
    for field in AuditEvent._meta.concrete_fields
    if field.attname not in ("id", "seq", "prev_digest", "digest")
)
# The two kinds of bearer token, as `find_token` keys them.
ACCOUNT_TOKEN, AGENT_TOKEN = "account", "agent"
# One field a row: (keyName, key id, ciphertext).
FieldRow = tuple[str, str, bytes]
# PostgreSQL: credvault's advisory locks are (GATE_NAMESPACE, key), the two-key form, whose keys
# never meet those of the one-key form; the key is the account's id modulo 2^31
# (`PostgreSQL.gate`).
GATE_NAMESPACE = 1668702838
# The lock (PUBLISHING_NAMESPACE, 0) is held by the worker that publishes webhook events.
PUBLISHING_NAMESPACE = GATE_NAMESPACE + 1


class _SingleWriter(Protocol):
    """SQLite's database wrapper (services/storage/backends/sqlite/base.py)."""

    def single_write(self) -> AbstractContextManager[None]: ...


class Dialect:
    """The statements every vendor runs as written."""

    # Each vendor's own statements (set in its __init__).
    lock_service: str
    append_event: str

    def __init__(self, quote: Callable[[str], str]) -> None:
        def table(model: type[Model]) -> str:
            return quote(model._meta.db_table)

        self.table = table
        bearer_columns = "t.id, t.prefix, t.last_used_at, t.expires_at, t.revoked_at"
        account_columns = "t.account_id, a.name, a.is_active"
        self.find_token = {
            ACCOUNT_TOKEN: (
                f"SELECT {bearer_columns}, {account_columns} FROM {table(ApiToken)} t "
                f"JOIN {table(Account)} a ON a.id = t.account_id WHERE t.digest = %s"
            ),
            AGENT_TOKEN: (
                f"SELECT {bearer_columns}, {account_columns}, t.agent_id, t.agent_name "
                f"FROM {table(AgentToken)} t JOIN {table(Account)} a ON a.id = t.account_id "
                "WHERE t.digest = %s"
            ),
        }
        self.list_services = (
            f"SELECT service, key_type, connected_at, status FROM {table(ConnectedService)} "
            "WHERE account_id = %s ORDER BY service"
        )
        # The agent read: grant, service and fields in one statement. No row: no grant; a row
        # without fields: nothing stored; otherwise the fields of one committed store.
        self.read_granted_set = (
            "SELECT g.access, g.methods, g.paths, s.key_type, s.connected_at, s.generation, "
            "s.status, g.base, g.graphql, g.expires_at, g.approve, "
            "f.id, f.key_name, f.key_id, f.ciphertext "
            f"FROM {table(Grant)} g "
            f"LEFT JOIN {table(ConnectedService)} s "
            "ON s.account_id = %s AND s.service = g.service "
            f"LEFT JOIN {table(CredentialField)} f ON f.connected_service_id = s.id "
            "WHERE g.agent_id = %s AND g.service = %s ORDER BY f.key_name"
        )
        # An agent's calls allowed for N minutes, of one service, alive: the latest first.
        self.standing_approvals = (
            f"SELECT id, rule FROM {table(Approval)} WHERE agent_id = %s AND status = %s "
            "AND kind = %s AND service = %s AND allowed_until > %s ORDER BY allowed_until DESC"
        )
        self.move_service = (
            f"UPDATE {table(ConnectedService)} SET generation = %s, key_type = %s, "
            "connected_at = %s, refresh_by = %s, status = 'connected', refreshing_until = NULL "
            "WHERE id = %s"
        )
        self.audit_insert = (
            f"INSERT INTO {table(AuditEvent)} ({', '.join(AUDIT_GIVEN)}, seq, prev_digest, "
            "digest) SELECT " + ", ".join(f"%({column})s" for column in AUDIT_GIVEN)
        )
        # The enabled webhook endpoints of an account and the types each takes.
        self.webhook_subscriptions = (
            f"SELECT id, events FROM {table(WebhookEndpoint)} "
            "WHERE account_id = %s AND enabled ORDER BY id"
        )
        # Raise the account's last webhook event sequence by %s (the row made at its first
        # event): the new last.
        sequences = table(WebhookSequence)
        self.take_webhook_sequences = (
            f"INSERT INTO {sequences} (account_id, last) VALUES (%s, %s) ON CONFLICT "
            f"(account_id) DO UPDATE SET last = {sequences}.last + excluded.last RETURNING last"
        )
        self.insert_webhook_event = (
            f"INSERT INTO {table(WebhookEvent)} (id, account_id, type, data, occurred_at) "
            "VALUES (%s, %s, %s, %s, %s)"
        )
        # The completion of an event written before its call left: outside its chained form.
        self.complete_event = (
            f"UPDATE {table(AuditEvent)} SET outcome = %s, status = %s, upstream_status = %s, "
            "completion_mac = %s WHERE account_id = %s AND seq = %s"
        )

    @lru_cache(maxsize=64)  # noqa: B019 (one instance per vendor, kept for the process)
    def insert_fields(self, count: int) -> str:
        values = ", ".join(["(%s, %s, %s, %s)"] * count)
        return (
            f"INSERT INTO {self.table(CredentialField)} "
            f"(connected_service_id, key_name, key_id, ciphertext) VALUES {values}"
        )

    @lru_cache(maxsize=64)  # noqa: B019
    def upsert_fields(self, count: int) -> str:
        """Write over the fields whose keyName stays, insert the others: on PostgreSQL the new
        row version stays on its page and no index gets an entry (a HOT update), where a delete
        and an insert add an entry to every index and leave the old ones for VACUUM."""
        return self.insert_fields(count) + (
            " ON CONFLICT (connected_service_id, key_name) DO UPDATE "
            "SET key_id = excluded.key_id, ciphertext = excluded.ciphertext"
        )

    @staticmethod
    def field_params(service_id: int, rows: Sequence[FieldRow]) -> list:
        return [item for name, key_id, blob in rows for item in (service_id, name, key_id, blob)]

    def lock_head(self, cursor, account_id: int) -> None:
        """Lock the account's audit head (its account row) for the rest of the transaction."""
        raise NotImplementedError

    def try_publishing_lock(self, cursor) -> bool:
        """Whether this transaction is the one that publishes webhook events."""
        raise NotImplementedError

    def lock_service_params(self, account_id: int, service: str) -> list:
        return [account_id, service]

    def find_locked_service(self, cursor, account_id: int, service: str) -> list[tuple]:
        """The service's (id, generation), its row locked after the account's audit head."""
        cursor.execute(self.lock_service, self.lock_service_params(account_id, service))
        return cursor.fetchall()

    def write_replacement(
        self, cursor, service_id: int, moved: list, rows: Sequence[FieldRow]
    ) -> None:
        """Move the service row (`moved`: generation, key type, time, id) and replace its
        fields with `rows`."""
        raise NotImplementedError

    @overload
    @staticmethod
    def read_datetime(value: datetime | str) -> datetime: ...
    @overload
    @staticmethod
    def read_datetime(value: None) -> None: ...
    @staticmethod
    def read_datetime(value: datetime | str | None) -> datetime | None:
        """A datetime column as this vendor's plain cursor gives it, as an aware UTC datetime."""
        return value  # type: ignore[return-value]

    @staticmethod
    def write_datetime(value: datetime) -> datetime | str:
        """An aware datetime as a parameter of this vendor's plain cursor."""
        return value

    def single_write(self, db: BaseDatabaseWrapper) -> AbstractContextManager:
        """Around one write statement outside a transaction."""
        return nullcontext()

    # --- schema and start-up (schema.py, checks.py) -------------------------------------------

    @staticmethod
    def audit_trigger(quote: Callable[[str], str], events: str, accounts: str) -> list[str]:
        """The DDL of what the audit append needs beyond the models' tables."""
        return []

    @staticmethod
    def drop_audit_trigger(quote: Callable[[str], str]) -> list[str]:
        return []

    def audit_trigger_missing(self, cursor) -> bool:
        return False

    @staticmethod
    def version_problem() -> str | None:
        """Why this vendor's version cannot run credvault, or None."""
        return None


class PostgreSQL(Dialect):
    def __init__(self, quote: Callable[[str], str]) -> None:
        super().__init__(quote)
        accounts, services = self.table(Account), self.table(ConnectedService)
        # The writers of an account wait at its gate, then lock its row. PostgreSQL grants a
        # lock of its lock manager, such as the gate, in the order it was asked for; a row
        # lock goes to whichever transaction takes it first as it is let go, and with 16
        # stores of one account at once their p99 was 3.5 to 5.5 times their median; through
        # the gate, 1.3 to 1.5 times (docs/performance.md, "The store's tail"). The gate is
        # let go with the transaction, as the row's lock is; taken again by the same
        # transaction it is granted at once. The row is locked only once the join has the
        # gate's row: after the gate. A statement that locks the row alone (a read's event)
        # queues at the row as before; a transaction that did so and then asks for the gate
        # goes against the lock order, and PostgreSQL's deadlock detector sees both waits.
        gate = "WITH gate AS MATERIALIZED (SELECT pg_advisory_xact_lock(%s::int4, %s::int4))"
        head = f"SELECT a.id FROM {accounts} a, gate WHERE a.id = %s FOR UPDATE OF a"
        self.lock_audit_head = f"{gate} {head}"
        # The head's lock is taken first: the subquery's value is computed before the services
        # are scanned, and it is the account's row, locked.
        self.lock_service = (
            f"{gate}, head AS ({head}) SELECT id, generation FROM {services} "
            "WHERE account_id = (SELECT id FROM head) AND service = %s FOR UPDATE"
        )
        # `head` reads the account row under its lock, so it is the last committed head even
        # after a wait; it is referenced twice, so it runs once and both writes see one value.
        self.append_event = (
            "WITH head AS (SELECT audit_seq + 1 AS seq, audit_head AS prev_digest "
            f"FROM {accounts} WHERE id = %(account_id)s FOR UPDATE), "
            "event AS (SELECT seq, prev_digest, encode(sha256(convert_to(prev_digest || chr(10) "
            "|| %(canonical_before)s || seq::text || %(canonical_after)s, 'UTF8')), 'hex') "
            "AS digest FROM head), "
            f"moved AS (UPDATE {accounts} SET audit_seq = event.seq, audit_head = event.digest "
            "FROM event WHERE id = %(account_id)s) "
            f"{self.audit_insert}, seq, prev_digest, digest FROM event "
            "RETURNING seq, prev_digest, digest"
        )

    @lru_cache(maxsize=64)  # noqa: B019
    def replace_fields(self, count: int) -> str:
        """Move the service to its next generation, delete its fields whose keyName is not in
        the new set, write the new set over the others or insert it: one statement. The three
        writes touch different rows, so their order does not matter."""
        return (
            f"WITH moved AS ({self.move_service}), "
            f"cleared AS (DELETE FROM {self.table(CredentialField)} "
            "WHERE connected_service_id = %s AND NOT key_name = ANY(%s)) "
            f"{self.upsert_fields(count)}"
        )

    @staticmethod
    def gate(account_id: int) -> list[int]:
        """The account's gate (`pg_advisory_xact_lock`'s two keys). Beyond 2^31 accounts two
        of them may share one: they then wait on each other, as one account's writers do."""
        return [GATE_NAMESPACE, account_id % 2**31]

    def lock_head(self, cursor, account_id: int) -> None:
        cursor.execute(self.lock_audit_head, [*self.gate(account_id), account_id])

    def try_publishing_lock(self, cursor) -> bool:
        """The one publisher of webhook events, until the transaction ends: False when another
        worker holds it."""
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s::int4, 0)", [PUBLISHING_NAMESPACE])
        return bool(cursor.fetchone()[0])

    def lock_service_params(self, account_id: int, service: str) -> list:
        return [*self.gate(account_id), account_id, service]

    def write_replacement(
        self, cursor, service_id: int, moved: list, rows: Sequence[FieldRow]
    ) -> None:
        names = [name for name, _, _ in rows]
        cursor.execute(
            self.replace_fields(len(rows)),
            [*moved, service_id, names, *self.field_params(service_id, rows)],
        )


class SQLite(Dialect):
    # INSERT ... RETURNING, which the audit append uses.
    MINIMUM_VERSION = (3, 35, 0)
    AUDIT_TRIGGER = "services_auditevent_moves_head"

    def __init__(self, quote: Callable[[str], str]) -> None:
        super().__init__(quote)
        accounts, services = self.table(Account), self.table(ConnectedService)
        self.lock_service = (
            f"SELECT id, generation FROM {services} WHERE account_id = %s AND service = %s"
        )
        # The trigger moves the head within the same statement (`audit_trigger`).
        self.append_event = (
            f"{self.audit_insert}, audit_seq + 1, audit_head, "
            "SHA256(audit_head || char(10) || %(canonical_before)s || (audit_seq + 1) "
            "|| %(canonical_after)s) "
            f"FROM {accounts} WHERE id = %(account_id)s RETURNING seq, prev_digest, digest"
        )
        self.find_audit_trigger = "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = %s"

    @lru_cache(maxsize=64)  # noqa: B019
    def clear_other_fields(self, count: int) -> str:
        return (
            f"DELETE FROM {self.table(CredentialField)} WHERE connected_service_id = %s "
            f"AND key_name NOT IN ({', '.join(['%s'] * count)})"
        )

    def lock_head(self, cursor, account_id: int) -> None:
        """Nothing to run: the IMMEDIATE transaction holds the database's write lock."""

    def try_publishing_lock(self, cursor) -> bool:
        """Always: the IMMEDIATE transaction holds the database's write lock."""
        return True

    def write_replacement(
        self, cursor, service_id: int, moved: list, rows: Sequence[FieldRow]
    ) -> None:
        names = [name for name, _, _ in rows]
        cursor.execute(self.clear_other_fields(len(rows)), [service_id, *names])
        cursor.execute(self.move_service, moved)
        cursor.execute(self.upsert_fields(len(rows)), self.field_params(service_id, rows))

    @overload
    @staticmethod
    def read_datetime(value: datetime | str) -> datetime: ...
    @overload
    @staticmethod
    def read_datetime(value: None) -> None: ...
    @staticmethod
    def read_datetime(value: datetime | str | None) -> datetime | None:
        """SQLite's plain cursor gives a naive datetime, or its text (`YYYY-MM-DD HH:MM:SS
        [.ffffff]`), holding UTC, as Django stores it with USE_TZ."""
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    @staticmethod
    def write_datetime(value: datetime) -> datetime | str:
        """Its text in UTC, as Django stores it with USE_TZ (`read_datetime` reads it back)."""
        return str((value if value.tzinfo is UTC else value.astimezone(UTC)).replace(tzinfo=None))

    def single_write(self, db: BaseDatabaseWrapper) -> AbstractContextManager:
        """Queued on the writers' lock, as a transaction is."""
        return cast(_SingleWriter, db).single_write()

    @staticmethod
    def audit_trigger(quote: Callable[[str], str], events: str, accounts: str) -> list[str]:
        """The trigger that moves an account's chain head as its event is inserted, so that the
        insert alone appends atomically (PostgreSQL does it in the append's WITH clause)."""
        return [
            f"CREATE TRIGGER {quote(SQLite.AUDIT_TRIGGER)} AFTER INSERT ON {quote(events)} "
            f"BEGIN UPDATE {quote(accounts)} SET audit_seq = NEW.seq, audit_head = NEW.digest "
            "WHERE id = NEW.account_id; END"
        ]

    @staticmethod
    def drop_audit_trigger(quote: Callable[[str], str]) -> list[str]:
        return [f"DROP TRIGGER IF EXISTS {quote(SQLite.AUDIT_TRIGGER)}"]

    def audit_trigger_missing(self, cursor) -> bool:
        cursor.execute(self.find_audit_trigger, [self.AUDIT_TRIGGER])
        return not cursor.fetchall()

    @staticmethod
    def version_problem() -> str | None:
        if sqlite3.sqlite_version_info >= SQLite.MINIMUM_VERSION:
            return None
        return (
            f"SQLite {sqlite3.sqlite_version} is too old: credvault needs 3.35 or later "
            "(INSERT ... RETURNING)."
        )


_DIALECTS: dict[str, type[Dialect]] = {"postgresql": PostgreSQL, "sqlite": SQLite}
_built: dict[type[Dialect], Dialect] = {}


def dialect_class(db: BaseDatabaseWrapper) -> type[Dialect]:
    """The one question of which database `db` is on."""
    try:
        return _DIALECTS[db.vendor]
    except KeyError:
        raise NotImplementedError(
            f"credvault runs on PostgreSQL or SQLite, not {db.vendor}"
        ) from None


def dialect_for(db: BaseDatabaseWrapper) -> Dialect:
    """The statements of `db`'s vendor, their texts built on first use."""
    cls = dialect_class(db)
    dialect = _built.get(cls)
    if dialect is None:
        dialect = _built[cls] = cls(db.ops.quote_name)
    return dialect
