"""PostgreSQL with each worker's idle connections kept open for its next requests
(backends/idle.py) and a health check that costs no round trip.

Django's health check (`CONN_HEALTH_CHECKS`) sends `SELECT 1` before every request's first query
(measured: docs/performance.md). An idle connection has nothing to read unless the server has
sent something of its own (an error before it closed the connection, or the close), so one
whose socket is readable, or whose libpq status is bad, is not reused: it is checked as it is
taken from the idle ones. Outside the idle state Django's own check runs.

Timestamps are read by psycopg's own loader, the C one of psycopg[binary]: Django's subclass of
the pure-Python loader parses every `timestamptz` in Python to set its time zone, while with
`USE_TZ` and the session in UTC (Django sets it on connecting) psycopg's loader already
answers the same aware datetimes in UTC.
"""

from __future__ import annotations

import select
from datetime import UTC, datetime
from functools import lru_cache

import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base, creation
from psycopg import adapt, pq
from psycopg.abc import AdaptContext, Buffer, Loader

from services.storage.backends.idle import IdleConnections, OpenSlots

_TIMESTAMPTZ = psycopg.adapters.types["timestamptz"].oid


def _psycopg_loader() -> type[Loader]:
    """The C loader of psycopg[binary] where installed; it cannot be subclassed."""
    loader = psycopg.adapters.get_loader(_TIMESTAMPTZ, pq.Format.TEXT)
    if loader is None:
        raise ImproperlyConfigured("psycopg has no loader of timestamptz")
    return loader


_PSYCOPG_LOADER = _psycopg_loader()


IDLE = IdleConnections()
SLOTS = OpenSlots()


class UTCTimestamptzLoader(adapt.Loader):
    """psycopg's own `timestamptz` loader. `timezone` is what Django's cursor factory compares
    with the connection's before registering its own loader on the cursor."""

    timezone = UTC

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        # psycopg's loader reads the session's time zone (UTC) from the connection.
        self._loader = _PSYCOPG_LOADER(oid, context)

    def load(self, data: Buffer) -> datetime:
        return self._loader.load(data)


@lru_cache
def _utc_adapters(template: adapt.AdaptersMap) -> adapt.AdaptersMap:
    """Django's adapters with psycopg's loader for `timestamptz`."""
    adapters = adapt.AdaptersMap(template)
    adapters.register_loader(_TIMESTAMPTZ, UTCTimestamptzLoader)
    return adapters


def _idle_connection_alive(connection: psycopg.Connection) -> bool:
    """Whether an idle connection can be used: its libpq status is good and its socket has
    nothing to read (an idle connection reads something only when the server sent an error
    before closing it, or the close itself)."""
    pgconn = connection.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


class DatabaseCreation(creation.DatabaseCreation):
    def _destroy_test_db(self, test_database_name: str, verbosity: int) -> None:
        IDLE.close_all()  # PostgreSQL drops no database that a session is connected to
        super()._destroy_test_db(test_database_name, verbosity)  # type: ignore[misc]  # Django's private API: not stubbed


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation

    _holds_slot = False

    def get_new_connection(self, conn_params: dict) -> psycopg.Connection:
        """An idle connection of this worker that is still alive, else a new one, within the
        worker's open slots. One the server closed while it was idle (a restart, an idle
        timeout) is closed and dropped."""
        if not SLOTS.acquire():
            raise psycopg.OperationalError("every database connection of this worker is in use")
        try:
            while (connection := IDLE.take(self.settings_dict)) is not None:
                if _idle_connection_alive(connection):
                    break
                connection.close()
            else:
                connection = super().get_new_connection(conn_params)
        except BaseException:
            SLOTS.release()
            raise
        self._holds_slot = True
        return connection

    def _close(self) -> None:
        """Kept open for the next request when it is idle (no transaction open or broken).
        Closed inside an atomic block, Django keeps the connection on the wrapper until the
        block ends: it must be closed, not handed to another request."""
        connection = self.connection
        try:
            if (
                connection is not None
                and not self.in_atomic_block
                and connection.pgconn.transaction_status == pq.TransactionStatus.IDLE
                and IDLE.give(self.settings_dict, connection)
            ):
                return
            super()._close()  # type: ignore[misc]  # Django's private API: not stubbed
        finally:
            if self._holds_slot:
                self._holds_slot = False
                SLOTS.release()

    def get_connection_params(self) -> dict:
        params = super().get_connection_params()
        if settings.USE_TZ and self.timezone is UTC:
            params["context"] = _utc_adapters(params["context"])
        return params

    def is_usable(self) -> bool:
        if self.connection is None:
            return False
        if self.connection.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return super().is_usable()
        return _idle_connection_alive(self.connection)
