"""The request's database connections while it waits on the network."""

from __future__ import annotations

from django.db import connections


def give_back_connections() -> None:
    """Give the request's connections back to its worker's pool before a call that may wait
    seconds on another server (a provider's check, a brokered call and its stream), so the
    wait holds no connection other requests need. The connection's object (Django's
    `DatabaseWrapper`, about 4.5 KiB per greenlet) goes too: hundreds of waiting calls would
    each keep one. Kept: a connection inside a transaction (it must end there) and one that
    stays open when closed (an in-memory SQLite database)."""
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        connection.close()
        if connection.connection is None:
            del connections[connection.alias]
