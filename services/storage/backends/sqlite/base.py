"""SQLite with its writers queued on an OS file lock instead of SQLite's busy polling, which
sleeps through other workers' sub-millisecond commits while its client waits (measured:
docs/performance.md; the operator's view: docs/production.md#sqlite-with-several-workers).

A transaction first takes an exclusive `flock()` on a file beside the database, then runs
`BEGIN IMMEDIATE`, and lets go after its COMMIT or ROLLBACK; a single write outside a
transaction takes it around the statement (`single_write`). The kernel wakes the next writer
at once; readers take no lock (WAL); a process that dies lets go with it.

The lock is reentrant per connection: `flock()` is not (a second descriptor of the same file
would wait on the first forever), so the connection counts how deep it holds the lock and
lets go when the outermost holder does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from typing import NamedTuple

from django.db.backends.sqlite3 import base, creation
from django.db.utils import OperationalError

from services.storage.backends.idle import IdleConnections


def writer_lock_path(database: str) -> str:
    return f"{database}-writer.lock"


class DatabaseCreation(creation.DatabaseCreation):
    def _destroy_test_db(self, test_database_name: str, verbosity: int) -> None:
        IDLE.close_all()
        super()._destroy_test_db(test_database_name, verbosity)  # type: ignore[misc]  # Django's private API: not stubbed
        if not self.is_in_memory_db(test_database_name):
            with contextlib.suppress(FileNotFoundError):
                os.remove(writer_lock_path(test_database_name))


class _Idle(NamedTuple):
    """An idle connection and the file it was opened on."""

    connection: sqlite3.Connection
    opened_on: tuple[int, int] | None

    def close(self) -> None:
        self.connection.close()


IDLE = IdleConnections()
# This process's writers queue here first, then on the file lock with the other processes:
# under gevent, a greenlet that waited in flock() would stop every greenlet of its worker,
# the lock's holder among them.
PROCESS_WRITER = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation
    _writer_lock: int | None = None
    # How many holders (a transaction, single writes) share the lock now.
    writer_lock_depth = 0
    # Whether the open transaction is one of them.
    _transaction_holds_lock = False

    def _take_writer_lock(self) -> None:
        self.writer_lock_depth += 1
        if self.writer_lock_depth > 1 or self.is_in_memory_db():
            return  # held already; or one connection's database, nobody to queue behind
        try:
            path = writer_lock_path(self.settings_dict["NAME"])
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise OperationalError(f"cannot open the writer lock: {exc.strerror}") from exc
            PROCESS_WRITER.acquire()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                PROCESS_WRITER.release()
                os.close(fd)
                raise
        except BaseException:
            self.writer_lock_depth -= 1
            raise
        self._writer_lock = fd

    def _let_go_writer_lock(self, *, entirely: bool = False) -> None:
        if self.writer_lock_depth == 0:
            return
        self.writer_lock_depth = 0 if entirely else self.writer_lock_depth - 1
        if self.writer_lock_depth == 0:
            fd, self._writer_lock = self._writer_lock, None
            if fd is not None:
                os.close(fd)  # closing the descriptor lets go of its lock
                PROCESS_WRITER.release()

    @contextlib.contextmanager
    def single_write(self) -> Iterator[None]:
        """One write statement queued on the writer lock like a transaction: in autocommit
        mode SQLite commits the statement by itself before the lock is let go. Inside a
        transaction, which holds the lock, it only counts one more holder."""
        self._take_writer_lock()
        try:
            yield
        finally:
            self._let_go_writer_lock()

    def _start_transaction_under_autocommit(self) -> None:
        self._take_writer_lock()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # Django's private API: not stubbed
        except BaseException:
            self._let_go_writer_lock()
            raise
        self._transaction_holds_lock = True

    def _end_transaction_hold(self) -> None:
        """The transaction's share of the lock, let go once: a commit that fails is followed
        by Django's rollback, and the two must not both count down an outer holder's share."""
        if self._transaction_holds_lock:
            self._transaction_holds_lock = False
            self._let_go_writer_lock()

    def _commit(self) -> None:
        # A failed commit keeps the lock until the rollback that follows.
        super()._commit()  # type: ignore[misc]  # Django's private API: not stubbed
        self._end_transaction_hold()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # Django's private API: not stubbed
        finally:
            self._end_transaction_hold()

    # The database file (device, inode) this wrapper's connection was opened on.
    _opened_on: tuple[int, int] | None = None

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.settings_dict["NAME"])
        except OSError:
            return None
        return stat.st_dev, stat.st_ino

    def get_new_connection(self, conn_params):
        """An idle connection of this worker to the same database file, else a new one. One
        opened on a file that has since been replaced (a restored backup, a test database
        made again at the same path) is closed: its pages are another file's."""
        if self.is_in_memory_db():
            return super().get_new_connection(conn_params)
        identity = self._file_identity()
        while (idle := IDLE.take(self.settings_dict)) is not None:
            if identity is not None and idle.opened_on == identity:
                self._opened_on = identity
                return idle.connection
            idle.close()
        connection = super().get_new_connection(conn_params)
        self._opened_on = self._file_identity()
        return connection

    def _close(self) -> None:
        try:
            if (
                self.is_in_memory_db()
                or self.in_atomic_block  # the wrapper keeps it until the block ends
                or self.connection.in_transaction
                or not IDLE.give(self.settings_dict, _Idle(self.connection, self._opened_on))
            ):
                super()._close()  # type: ignore[misc]  # Django's private API: not stubbed
        finally:
            self._transaction_holds_lock = False
            self._let_go_writer_lock(entirely=True)
