"""The request's database connections while it waits on the network."""

from __future__ import annotations

from django.db import connections


def give_back_connections() -> None:
    """Give the request's connections back to its worker's pool before a call that may wait
    seconds on another server (a provider's check): the wait holds no connection that other
    requests need, and the request's next query takes one again. A connection inside a
    transaction is kept: the transaction must end on it."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()
