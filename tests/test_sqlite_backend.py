"""The SQLite backend queues writers on a file lock, and converts each statement's parameter style
once (credvault/sqlite/base.py)."""

from __future__ import annotations

import fcntl
import os

import pytest
from django.db import OperationalError, connection, transaction
from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangoCursor

from credvault.sqlite.base import converted_query, writer_lock_path
from services import audit, sql
from services.accounts import create_account
from services.models import Account, AuditAction, AuditEvent, AuditOutcome

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lock_path() -> str:
    if connection.vendor != "sqlite":
        pytest.skip("the writer lock belongs to the SQLite backend")
    return writer_lock_path(connection.settings_dict["NAME"])


def held_elsewhere(path: str) -> bool:
    """Whether another open file description of the lock file can take it now."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_transaction_holds_the_lock_until_it_commits(lock_path):
    with transaction.atomic():
        assert held_elsewhere(lock_path)
        with transaction.atomic():  # a savepoint takes nothing more
            assert held_elsewhere(lock_path)
        assert held_elsewhere(lock_path)
    assert not held_elsewhere(lock_path)


def test_a_rolled_back_transaction_lets_go(lock_path):
    held = []

    def fail_inside() -> None:
        with transaction.atomic():
            held.append(held_elsewhere(lock_path))
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail_inside()
    assert held == [True]
    assert not held_elsewhere(lock_path)


def test_a_failed_begin_lets_go(lock_path, monkeypatch):
    def refuse(self):
        raise OperationalError("begin refused")

    monkeypatch.setattr(
        "django.db.backends.sqlite3.base.DatabaseWrapper._start_transaction_under_autocommit",
        refuse,
    )
    with pytest.raises(OperationalError), transaction.atomic():
        pass
    assert not held_elsewhere(lock_path)


def test_a_closed_connection_lets_go(lock_path):
    with transaction.atomic():
        assert held_elsewhere(lock_path)
        connection.close()  # a worker that goes away mid-transaction
        assert not held_elsewhere(lock_path)
    assert not held_elsewhere(lock_path)


def test_reads_take_no_lock(lock_path):
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM services_account")
            assert cursor.fetchone()[0] >= 0
    finally:
        os.close(fd)


def test_an_unopenable_lock_file_is_a_database_error(monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("the writer lock belongs to the SQLite backend")
    monkeypatch.setattr(
        "credvault.sqlite.base.writer_lock_path", lambda name: "/nonexistent-dir/x.lock"
    )
    with pytest.raises(OperationalError, match="writer lock"), transaction.atomic():
        pass


def test_a_single_write_holds_the_lock_for_its_statement(lock_path):
    with connection.single_write():
        assert held_elsewhere(lock_path)
    assert not held_elsewhere(lock_path)
    with transaction.atomic():
        with connection.single_write():  # the transaction holds it already
            assert held_elsewhere(lock_path)
        assert held_elsewhere(lock_path)  # and keeps it until it ends
    assert not held_elsewhere(lock_path)


def test_a_reads_event_is_one_statement_under_the_lock(lock_path, monkeypatch):
    account = create_account(name="reader")
    seen = []
    append = sql.append_audit_event

    def spy(*args):
        seen.append((held_elsewhere(lock_path), connection.get_autocommit()))
        return append(*args)

    monkeypatch.setattr(sql, "append_audit_event", spy)
    for _ in range(2):
        event = audit.record(
            audit.AuditContext.for_command(account.pk),
            action=AuditAction.SERVICES_LIST,
            outcome=AuditOutcome.SUCCESS,
            status=200,
        )
    # Queued on the writers' lock, outside a transaction: the statement commits by itself.
    assert seen == [(True, True), (True, True)]
    assert not held_elsewhere(lock_path)
    # The trigger moved the head as the event was inserted.
    account = Account.objects.get(pk=account.pk)
    assert (account.audit_seq, account.audit_head) == (2, event.digest)
    assert AuditEvent.objects.get(account=account, seq=2).digest == event.digest
    assert audit.verify_chain(account) == (2, None)


@pytest.fixture
def sqlite() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the parameter style's conversion belongs to the SQLite backend")


@pytest.mark.parametrize(
    ("query", "params"),
    [
        ("SELECT %s, %s WHERE 'ab' LIKE 'a%%'", [1, 2]),
        ("SELECT 1", []),
        ("SELECT %(a)s, %(b)s, '%%'", {"a": 1, "b": 2}),
        ("SELECT %(b)s", {"b": 1, "unused": 2}),
    ],
)
def test_a_statement_is_converted_as_django_converts_it(sqlite, query, params):
    connection.ensure_connection()
    names = list(params) if isinstance(params, dict) else None
    django_text = DjangoCursor(connection.connection).convert_query(query, param_names=names)
    assert converted_query(query, None if names is None else tuple(names)) == django_text
    with connection.cursor() as cursor:
        cursor.execute(query, params)  # SQLite accepts the converted text with these params
        assert cursor.fetchall()


def test_the_backend_converts_each_statement_once(sqlite):
    query = "SELECT %s + 1"
    with connection.cursor() as cursor:
        cursor.execute(query, [1])
        hits = converted_query.cache_info().hits
        cursor.execute(query, [2])
        assert cursor.fetchall() == [(3,)]
    assert converted_query.cache_info().hits == hits + 1
