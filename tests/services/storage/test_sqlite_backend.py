"""The SQLite backend queues writers on a file lock, reentrant per connection
(services/storage/backends/sqlite/base.py); the audit-head trigger and its check (E008)."""

from __future__ import annotations

import fcntl
import os
import threading

import pytest
from django.apps import apps
from django.db import OperationalError, connection, transaction

from services import audit
from services.accounts import create_account
from services.models import Account, AuditEvent
from services.storage.backends.sqlite.base import writer_lock_path
from services.storage.checks import check_audit_trigger
from services.storage.schema import create_audit_trigger

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
        "services.storage.backends.sqlite.base.writer_lock_path",
        lambda name: "/nonexistent-dir/x.lock",
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


def _finishes(work) -> bool:
    """Run `work` on a connection of its own; whether it ended within five seconds (a second
    flock() of the same file by the same connection would wait forever)."""
    done = threading.Event()

    def run() -> None:
        try:
            work()
            done.set()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=5)
    return done.is_set()


def test_a_transaction_inside_a_single_write_shares_its_lock(lock_path):
    states = []

    def nested() -> None:
        with connection.single_write():
            with transaction.atomic():
                create_account(name="nested")
                states.append(held_elsewhere(lock_path))
            states.append(held_elsewhere(lock_path))  # the single write still holds it
        states.append(held_elsewhere(lock_path))

    assert _finishes(nested)
    assert states == [True, True, False]
    assert Account.objects.filter(name="nested").exists()


def test_a_single_write_inside_a_transaction_shares_its_lock(lock_path):
    states = []

    def nested() -> None:
        with transaction.atomic():
            with connection.single_write():
                create_account(name="inner")
            states.append(held_elsewhere(lock_path))  # the transaction still holds it
        states.append(held_elsewhere(lock_path))

    assert _finishes(nested)
    assert states == [True, False]


def test_a_failed_commit_inside_a_single_write_keeps_its_lock(lock_path, monkeypatch):
    """Django rolls back after a commit that failed: the transaction's share of the lock is
    let go once, and the single write around it still holds its own."""
    from django.db.backends.base.base import BaseDatabaseWrapper

    def failing_commit(self) -> None:
        raise OperationalError("disk I/O error")

    states = []

    def nested() -> None:
        with connection.single_write():
            monkeypatch.setattr(BaseDatabaseWrapper, "_commit", failing_commit)
            with pytest.raises(OperationalError), transaction.atomic():
                create_account(name="lost")
            monkeypatch.undo()
            states.append((connection.writer_lock_depth, held_elsewhere(lock_path)))
        states.append((connection.writer_lock_depth, held_elsewhere(lock_path)))

    assert _finishes(nested)
    assert states == [(1, True), (0, False)]
    assert not Account.objects.filter(name="lost").exists()


def test_a_closed_connection_lets_go_of_a_nested_lock(lock_path):
    def close_inside() -> None:
        connection.ensure_connection()
        with connection.single_write(), connection.single_write():
            connection.close()
            assert not held_elsewhere(lock_path)

    assert _finishes(close_inside)
    assert not held_elsewhere(lock_path)


def test_a_reads_event_is_one_statement_under_the_lock(lock_path, monkeypatch):
    account = create_account(name="reader")
    seen = []

    def spy(execute, sql, params, many, context):
        seen.append((held_elsewhere(lock_path), connection.get_autocommit()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        for _ in range(2):
            event = audit.record(audit.Actor.command(account.pk), audit.Operation.LIST_SERVICES)
    # Queued on the writers' lock, outside a transaction: the statement commits by itself.
    assert seen == [(True, True), (True, True)]
    assert not held_elsewhere(lock_path)
    # The trigger moved the head as the event was inserted.
    account = Account.objects.get(pk=account.pk)
    assert (account.audit_seq, account.audit_head) == (2, event.digest)
    assert AuditEvent.objects.get(account=account, seq=2).digest == event.digest
    assert audit.verify_chain(account) == (2, None)


def test_a_missing_audit_trigger_fails_the_check(lock_path):
    assert check_audit_trigger(None, databases=["default"]) == []
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER services_auditevent_moves_head")
    try:
        [error] = check_audit_trigger(None, databases=["default"])
        assert error.id == "credvault.E008"
        assert "trigger" in error.msg
        assert check_audit_trigger(None, databases=None) == []  # only as a database check
    finally:
        with connection.schema_editor() as editor:
            create_audit_trigger(apps, editor)
    assert check_audit_trigger(None, databases=["default"]) == []
