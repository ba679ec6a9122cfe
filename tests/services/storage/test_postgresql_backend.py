"""What the hot paths rely on from PostgreSQL (services/storage/backends/postgresql,
credvault/settings.py, services/storage/dialects.py): prepared statements, timestamps parsed by
psycopg's own loader, and the locks a store takes in one statement."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import psycopg.sql
import pytest
from django.db import connection, transaction
from psycopg import pq

from services import bearer_tokens
from services.models import Account, ApiToken, ConnectedService
from services.storage import queries
from services.storage.backends.postgresql.base import UTCTimestamptzLoader
from services.storage.dialects import dialect_for

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
        assert queries.find_token(kind=queries.ACCOUNT_TOKEN, digest=bearer_tokens.digest(raw))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        prepared = [text for (text,) in cursor.fetchall()]
    # psycopg sends its placeholders as $1, $2...
    lookup = dialect_for(connection).find_token[queries.ACCOUNT_TOKEN]
    assert lookup.replace("%s", "$1") in prepared


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
    found = queries.find_token(kind=queries.ACCOUNT_TOKEN, digest="d" * 64)
    assert found.expires_at == moment


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
    """The store's find takes the audit head's lock in the same statement (dialects.py), so
    the store needs no statement of its own for it."""
    account, _ = alice_account_and_token
    service = ConnectedService.objects.create(
        account=account, service="github", key_type="api_key", connected_at=datetime.now(UTC)
    )
    name = "github" if connected else "not-yet"
    with transaction.atomic():
        found = queries.lock_service(account_id=account.pk, service=name)
        assert found == (queries.LockedService(service.pk, 1) if connected else None)
        assert not _lockable_elsewhere(Account._meta.db_table, account.pk)
        assert _lockable_elsewhere(ConnectedService._meta.db_table, service.pk) is not connected
    assert _lockable_elsewhere(Account._meta.db_table, account.pk)
