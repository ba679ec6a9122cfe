"""Each worker's open database connections that no request holds: both backends' pool.

gevent's workers serve each client connection in a greenlet, and Django keeps a database
connection per greenlet, so without this every client connection would open one (on PostgreSQL
a server process; on SQLite a WAL checkpoint at its close). Django closes a request's
connection at its end (CONN_MAX_AGE 0, storage/config.py); the backends give it back here
instead, outside a transaction only, at most `limit` of one database waiting.

A database that cannot be reached fails the request at once. On PostgreSQL (`max_connections`)
a worker opens at most LIMIT at once (`OpenSlots`), and a request that finds them all taken
waits for one (a request waiting on a provider gives its connection back,
storage/connections.py). A child process never takes its parent's connections (neither SQLite
nor libpq allows using one across a fork).
"""

from __future__ import annotations

import os
import threading
from typing import Any

LIMIT = 16


def _database(settings_dict: dict[str, Any]) -> tuple:
    """Which database a connection is to: connections to another are never mixed."""
    return tuple(settings_dict.get(key) for key in ("ENGINE", "NAME", "HOST", "PORT", "USER"))


class IdleConnections:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._pid = os.getpid()
        self._idle: dict[tuple, list[Any]] = {}
        self._inherited: list[dict[tuple, list[Any]]] = []

    def _own(self) -> dict[tuple, list[Any]]:
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._inherited.append(self._idle)
            self._idle = {}
        return self._idle

    def take(self, settings_dict: dict[str, Any]) -> Any | None:
        """The most recently given back connection to this database, or None."""
        idle = self._own().get(_database(settings_dict))
        return idle.pop() if idle else None

    def give(self, settings_dict: dict[str, Any], connection: Any) -> bool:
        """Keep `connection` for the next request; False when the caller must close it."""
        idle = self._own().setdefault(_database(settings_dict), [])
        if len(idle) >= self.limit:
            return False
        idle.append(connection)
        return True

    def close_all(self) -> None:
        """Close every idle connection of this process (before a test database is dropped)."""
        for idle in self._own().values():
            while idle:
                idle.pop().close()


class OpenSlots:
    """At most `limit` connections of this worker open at once; a request waits up to
    `wait_seconds` for one (under gevent, only its own greenlet waits), then fails with 503."""

    def __init__(self, limit: int = LIMIT, wait_seconds: float = 10.0) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        self.wait_seconds = wait_seconds

    def acquire(self) -> bool:
        return self._slots.acquire(timeout=self.wait_seconds)

    def release(self) -> None:
        self._slots.release()
