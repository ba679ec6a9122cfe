"""PostgreSQL with a health check that costs no round trip.

Django's health check (`CONN_HEALTH_CHECKS`) sends `SELECT 1` before the first query of every
request: one round trip of the few an audited request makes (measured: docs/performance.md). An
idle connection has nothing to read unless the server has sent something on its own: an
error before it closed the connection (a restart, `pg_terminate_backend`, an idle timeout),
or the close itself. So an idle connection whose socket is readable, or whose libpq status is
bad, is not reused. Outside the idle state (never the case between requests) Django's own
check runs.

Timestamps are read by psycopg's own loader. Django registers a subclass of psycopg's
pure-Python loader to set each value's time zone, which parses every `timestamptz` with
Python code (a list of 100 services read 100 of them). With `USE_TZ` and the database in UTC,
the session's time zone is UTC (Django sets it on connecting), and psycopg's loader, the C one
of psycopg[binary], already answers aware datetimes in UTC: the same values, parsed in C.
"""

from __future__ import annotations

import select
from datetime import UTC, datetime
from functools import lru_cache

import psycopg
from django.conf import settings
from django.db.backends.postgresql import base
from psycopg import adapt, pq

_TIMESTAMPTZ = psycopg.adapters.types["timestamptz"].oid
# The C loader of psycopg[binary] where installed; it cannot be subclassed.
_PSYCOPG_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ, pq.Format.TEXT)


class UTCTimestamptzLoader(adapt.Loader):
    """psycopg's own `timestamptz` loader. `timezone` is what Django's cursor factory compares
    with the connection's before registering its own loader on the cursor."""

    timezone = UTC

    def __init__(self, oid: int, context: adapt.AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        # psycopg's loader reads the session's time zone (UTC) from the connection.
        self._loader = _PSYCOPG_LOADER(oid, context)

    def load(self, data: bytes) -> datetime:
        return self._loader.load(data)


@lru_cache
def _utc_adapters(template: adapt.AdaptersMap) -> adapt.AdaptersMap:
    """Django's adapters with psycopg's loader for `timestamptz`."""
    adapters = adapt.AdaptersMap(template)
    adapters.register_loader(_TIMESTAMPTZ, UTCTimestamptzLoader)
    return adapters


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict:
        params = super().get_connection_params()
        if settings.USE_TZ and self.timezone is UTC:
            params["context"] = _utc_adapters(params["context"])
        return params

    def is_usable(self) -> bool:
        if self.connection is None:
            return False
        pgconn = self.connection.pgconn
        if pgconn.status != pq.ConnStatus.OK:
            return False
        if pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return super().is_usable()
        try:
            readable, _, _ = select.select([pgconn.socket], [], [], 0)
        except (OSError, ValueError, psycopg.Error):
            return False
        return not readable
