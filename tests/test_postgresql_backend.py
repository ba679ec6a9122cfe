"""What the hot paths rely on from PostgreSQL (credvault/postgresql/base.py, credvault/settings.py,
services/sql.py): prepared statements, timestamps parsed by psycopg's own loader, and the
locks a store takes in one statement."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import psycopg.sql
import pytest
from django.db import connection, transaction
from psycopg import pq

from credvault.postgresql.base import UTCTimestamptzLoader
from services import audit, sql, tokens
from services.audit import AuditContext
from services.models import Account, ApiToken, ConnectedService

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL backend's settings")


def _timestamptz_loader():
    connection.ensure_connection()
    oid = connection.connection.adapters.types["timestamptz"].oid
    return connection.connection.adapters.get_loader(oid, pq.Format.TEXT)


def test_a_statement_run_five_times_is_prepared(alice_account_and_token):
    """Django turns psycopg's prepared statements off unless OPTIONS names a threshold."""
    _, raw = alice_account_and_token
    for _ in range(6):
        assert sql.fetch(sql.account_token, [tokens.digest(raw)])
    prepared = sql.fetch(
        lambda db: "SELECT statement FROM pg_prepared_statements WHERE NOT from_sql", []
    )
    # psycopg sends its placeholders as $1, $2...
    assert sql.account_token(connection).replace("%s", "$1") in [text for (text,) in prepared]


def test_timestamps_are_read_by_psycopgs_loader():
    assert _timestamptz_loader() is UTCTimestamptzLoader
    if importlib.util.find_spec("psycopg_binary"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT now()")
            loader = cursor.cursor._tx.get_loader(
                connection.connection.adapters.types["timestamptz"].oid, pq.Format.TEXT
            )
        # The C loader, not Django's subclass of the Python one.
        assert type(loader._loader).__module__.startswith("psycopg_binary")


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 21, 9, 8, 7, 123456, tzinfo=UTC),
        datetime(2026, 11, 21, 9, 8, 7, tzinfo=UTC),  # no fraction
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 3, 29, 3, 30, tzinfo=timezone(timedelta(hours=2))),  # stored as UTC
    ],
)
def test_timestamps_read_back_as_written_in_utc(alice_account_and_token, moment):
    account, _ = alice_account_and_token
    token = ApiToken.objects.create(
        account=account, prefix="cvt_read", digest="d" * 64, expires_at=moment
    )
    read = ApiToken.objects.get(pk=token.pk).expires_at
    assert read == moment
    assert read.utcoffset() == timedelta(0)
    assert read.isoformat() == moment.astimezone(UTC).isoformat()
    rows = sql.fetch(sql.account_token, ["d" * 64])
    assert rows[0][3] == moment  # expires_at (sql._LOOKUP_COLUMNS)


def _lockable_elsewhere(table: str, pk: int) -> bool:
    """Whether another connection can lock the row now (NOWAIT)."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=db["NAME"],
        autocommit=True,
    ) as other:
        try:
            other.execute(
                psycopg.sql.SQL("SELECT id FROM {} WHERE id = %s FOR UPDATE NOWAIT").format(
                    psycopg.sql.Identifier(table)
                ),
                [pk],
            )
        except psycopg.errors.LockNotAvailable:
            return False
    return True


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("connected", [True, False])
def test_a_stores_first_statement_locks_the_head_and_the_service(
    alice_account_and_token, connected
):
    """The store's find takes the audit head's lock in the same statement (sql.py), so the
    store needs no statement of its own for it."""
    account, _ = alice_account_and_token
    service = ConnectedService.objects.create(
        account=account, service="github", key_type="api_key", connected_at=datetime.now(UTC)
    )
    name = "github" if connected else "not-yet"
    with transaction.atomic():
        head, rows = audit.lock_head_reading(
            AuditContext.for_command(account.pk),
            sql.find_service_locking_head,
            [account.pk, name],
        )
        assert head.account_id == account.pk
        assert rows == ([(service.pk, 1)] if connected else [])
        assert not _lockable_elsewhere(Account._meta.db_table, account.pk)
        assert _lockable_elsewhere(ConnectedService._meta.db_table, service.pk) is not connected
    assert _lockable_elsewhere(Account._meta.db_table, account.pk)
