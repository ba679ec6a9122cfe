"""The request's database connections while it waits on the network."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections

_kept = threading.local()


@contextmanager
def keeping_connections() -> Iterator[None]:
    """In this thread, keep the connections across outbound calls: a thread that is the only
    user of its connection (a webhook worker's) would give it back and take it again on every
    call for nothing."""
    _kept.on = True
    try:
        yield
    finally:
        _kept.on = False


def give_back_connections() -> None:
    """Give the request's connections back to its worker's pool before a call that may wait
    seconds on another server (a provider's check, a brokered call and its stream), so the
    wait holds no connection other requests need. The connection's object (Django's
    `DatabaseWrapper`, about 4.5 KiB per greenlet) goes too: hundreds of waiting calls would
    each keep one. Kept: a connection inside a transaction (it must end there), one that
    stays open when closed (an in-memory SQLite database), and a thread's that keeps them."""
    if getattr(_kept, "on", False):
        return
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        connection.close()
        if connection.connection is None:
            del connections[connection.alias]
