"""The request's database connections while it waits on the network."""

from __future__ import annotations

from django.db import connections


def give_back_connections() -> None:
    """Give the request's connections back to its worker's pool before a call that may wait
    seconds on another server (a provider's check, a brokered call and its stream): the wait
    holds no connection that other requests need, and the request's next query takes one
    again. The closed connection's object (Django's `DatabaseWrapper`, about 4.5 KiB, one per
    greenlet) goes too: hundreds of calls waiting on one worker would each keep one, and the
    next query builds it again from the settings, as a request's first query does. A
    connection inside a transaction is kept: the transaction must end on it. So is one that
    stays open when closed (an in-memory SQLite database: closing it would lose it)."""
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        connection.close()
        if connection.connection is None:
            del connections[connection.alias]
