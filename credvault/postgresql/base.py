"""PostgreSQL with a health check that costs no round trip.

Django's health check (`CONN_HEALTH_CHECKS`) sends `SELECT 1` before the first query of every
request: one round trip of the few an audited request makes (measured: BENCHMARKS.md). An
idle connection has nothing to read unless the server has sent something on its own: an
error before it closed the connection (a restart, `pg_terminate_backend`, an idle timeout),
or the close itself. So an idle connection whose socket is readable, or whose libpq status is
bad, is not reused. Outside the idle state (never the case between requests) Django's own
check runs.
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
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
