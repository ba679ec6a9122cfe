"""On PostgreSQL the writers of an account wait in order at its gate, a transaction-level
advisory lock, before they lock its audit head (services/storage/dialects.py, `PostgreSQL`):
held to the end of the transaction however it ends, taken before the row, granted in the
order asked, never a wait for another account's writers. Threads stand in for the greenlets of
a gevent worker: each waits on its own connection's socket."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import psycopg.sql
import pytest
from django.db import IntegrityError, OperationalError, connection, transaction

from services import credentials
from services.audit import Actor
from services.masking import Secret
from services.models import Account, ConnectedService
from services.sealed import OpenedSet
from services.storage import queries
from services.storage.dialects import GATE_NAMESPACE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip(
            "PostgreSQL's account gate: run the suite on PostgreSQL at 127.0.0.1:5432 "
            "(DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME, as .ci/run does)"
        )


def elsewhere() -> psycopg.Connection:
    """A connection of the test's own, outside Django's."""
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=db["NAME"],
        autocommit=True,
    )


def gates_held() -> dict[int, int]:
    """The accounts whose gate some session of this database holds, with how many hold it."""
    with elsewhere() as other:
        rows = other.execute(
            "SELECT l.objid, count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objsubid = 2 AND l.granted "
            "AND d.datname = current_database() GROUP BY l.objid",
            [GATE_NAMESPACE],
        ).fetchall()
    return {int(objid): count for objid, count in rows}


def waiting_on() -> list[str]:
    """What this database's waiting backends wait on (`advisory`, `tuple`, `transactionid`)."""
    with elsewhere() as other:
        rows = other.execute(
            "SELECT wait_event FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchall()
    return sorted(event for (event,) in rows)


def row_lockable_elsewhere(account) -> bool:
    with elsewhere() as other:
        try:
            other.execute(
                psycopg.sql.SQL("SELECT id FROM {} WHERE id = %s FOR UPDATE NOWAIT").format(
                    psycopg.sql.Identifier(Account._meta.db_table)
                ),
                [account.pk],
            )
        except psycopg.errors.LockNotAvailable:
            return False
    return True


class Worker(threading.Thread):
    """`work` in a thread with a database connection of its own, closed at its end; what it
    returned or raised."""

    def __init__(self, work: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.result: object = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()
            self.done.set()


def until(condition: Callable[[], bool], seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def holding(account, go: threading.Event, entered: threading.Event) -> Callable[[], None]:
    """A transaction that locks the account's head, says so, and waits for `go` to commit."""

    def work() -> None:
        with transaction.atomic():
            queries.lock_audit_head(account_id=account.pk)
            entered.set()
            assert go.wait(10)

    return work


def store(account, value: str) -> Callable[[], credentials.Stored]:
    fields = OpenedSet([("token", Secret(value))])

    def work() -> credentials.Stored:
        checked = credentials.credential_set(service="my-internal-api", fields=fields)
        return credentials.store_credentials(actor=Actor.command(account.pk), credentials=checked)

    return work


class Refused(Exception):
    pass


def locked_then(account, then: Callable[[], object]) -> None:
    """A transaction (inside one, a savepoint) that locks the account's head and the service
    `github`, then runs `then`."""
    with transaction.atomic():
        queries.lock_service(account_id=account.pk, service="github")
        then()


def refuse() -> None:
    raise Refused


def test_the_gate_is_held_to_the_commit(alice):
    with transaction.atomic():
        queries.lock_audit_head(account_id=alice.pk)
        assert gates_held() == {alice.pk: 1}
    assert gates_held() == {}


def test_the_gate_is_let_go_on_rollback(alice):
    def check_and_refuse() -> None:
        assert gates_held() == {alice.pk: 1}
        raise Refused

    with pytest.raises(Refused):
        locked_then(alice, check_and_refuse)
    assert gates_held() == {}


def test_the_gate_is_let_go_when_a_statement_fails_in_the_transaction(alice):
    def twice() -> None:
        ConnectedService.objects.create(account_id=alice.pk, service="a", key_type="x")
        ConnectedService.objects.create(account_id=alice.pk, service="a", key_type="x")

    with pytest.raises(IntegrityError):
        locked_then(alice, twice)
    assert gates_held() == {}


def test_the_gate_is_let_go_when_the_connection_is_closed_in_the_transaction(alice):
    def close_and_go_on() -> None:
        connection.close()
        queries.lock_audit_head(account_id=alice.pk)

    with pytest.raises(OperationalError, match="closed"):
        locked_then(alice, close_and_go_on)
    assert until(lambda: gates_held() == {})


def test_a_savepoint_rolled_back_leaves_the_transactions_gate_held(alice):
    """A nested block takes the gate again (granted at once: no wait for itself) and is
    rolled back; the transaction holds the gate and the row until it ends."""
    with transaction.atomic():
        queries.lock_audit_head(account_id=alice.pk)
        with pytest.raises(Refused):
            locked_then(alice, refuse)
        assert gates_held() == {alice.pk: 1}
        assert not row_lockable_elsewhere(alice)
    assert gates_held() == {}


def test_the_gate_is_taken_before_the_row(alice):
    """A writer that finds the gate taken waits there, holding nothing of the account."""
    with elsewhere() as other, other.transaction():
        other.execute(
            "SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", [GATE_NAMESPACE, alice.pk]
        )
        waiting = Worker(store(alice, "waits"))
        waiting.start()
        assert until(lambda: waiting_on() == ["advisory"])
        assert row_lockable_elsewhere(alice)
    waiting.join(10)
    assert waiting.error is None


def test_two_stores_of_one_account_wait_at_the_gate_and_both_succeed(alice):
    go, entered = threading.Event(), threading.Event()
    first = Worker(holding(alice, go, entered))
    first.start()
    assert entered.wait(5)
    second = Worker(store(alice, "second"))
    second.start()
    try:
        assert until(lambda: waiting_on() == ["advisory"])  # not at the row
        time.sleep(0.1)
        assert not second.done.is_set()
    finally:
        go.set()
        first.join(10)
        second.join(10)
    assert first.error is None
    assert second.error is None
    assert ConnectedService.objects.get(account=alice, service="my-internal-api").generation == 1
    assert gates_held() == {}


def test_waiting_writers_are_let_in_in_the_order_they_came(alice):
    # Stored once, so that each waiter replaces it. A waiter that would connect it reads the
    # services as they were when its statement began, before its wait, and retries as a
    # replacement when the first connection's commit wins the unique constraint.
    store(alice, "first")()
    go, entered = threading.Event(), threading.Event()
    first = Worker(holding(alice, go, entered))
    first.start()
    assert entered.wait(5)
    waiters = []
    try:
        for n in range(4):
            waiter = Worker(store(alice, f"value-{n}"))
            waiter.start()
            waiters.append(waiter)
            assert until(lambda n=n: len(waiting_on()) == n + 1)
    finally:
        go.set()
        for worker in [first, *waiters]:
            worker.join(10)
    assert [w.error for w in waiters] == [None] * 4
    # Each appended its event under the head lock: the events' order is the order they were
    # let in (the threads may report back in another).
    seqs = [w.result.event.seq for w in waiters]
    assert seqs == list(range(seqs[0], seqs[0] + 4))
    assert ConnectedService.objects.get(account=alice, service="my-internal-api").generation == 5


def test_one_accounts_writer_does_not_wait_for_anothers(alice, bob):
    go, entered = threading.Event(), threading.Event()
    first = Worker(holding(alice, go, entered))
    first.start()
    assert entered.wait(5)
    try:
        other = Worker(store(bob, "bob's"))
        other.start()
        other.join(10)
        assert other.done.is_set()
        assert other.error is None
        assert not first.done.is_set()  # alice's transaction is still open
    finally:
        go.set()
        first.join(10)
    assert first.error is None


def test_a_cycle_of_waits_is_broken_by_postgresqls_deadlock_detector(alice, bob):
    """Against the lock order, two transactions lock two accounts' heads in opposite orders:
    every wait is PostgreSQL's, which fails one of them; the other commits."""
    both = threading.Barrier(2, timeout=10)

    def crossing(first_account, then) -> Callable[[], None]:
        def work() -> None:
            with transaction.atomic():
                queries.lock_audit_head(account_id=first_account.pk)
                both.wait()
                queries.lock_audit_head(account_id=then.pk)

        return work

    one, other = Worker(crossing(alice, bob)), Worker(crossing(bob, alice))
    for worker in (one, other):
        worker.start()
    for worker in (one, other):
        worker.join(30)
    assert one.done.is_set()
    assert other.done.is_set()
    errors = [w.error for w in (one, other) if w.error is not None]
    assert len(errors) == 1
    assert isinstance(errors[0], OperationalError)
    assert "deadlock" in str(errors[0])


def test_no_gate_is_left_after_many_transactions(alice, bob):
    for n in range(100):
        account = alice if n % 2 else bob
        store(account, f"value-{n}")()
        if n % 10 == 0:
            with pytest.raises(Refused):
                locked_then(account, refuse)
    assert gates_held() == {}
