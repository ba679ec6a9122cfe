"""Pooled connections: each worker keeps its connections open for the next call (keep-alive, at
most POOL_CONNECTIONS idle per pool and POOL_KEYS pools), so a call costs one request, not a new
TCP and TLS handshake. A pool serves one destination, address and `pool_key` (a brokered call's
account and service): a connection a call left doubtful only ever carries the same account's
calls to the same service. TLS is verified against certifi's bundle alone; its connections'
sockets are watched by the call's watchdog and their answers are `FramedAnswer`s."""

from __future__ import annotations

import socket
import ssl
import threading
from collections import OrderedDict
from collections.abc import Hashable
from functools import lru_cache, partial
from typing import Any, cast

import certifi
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from providers.http.destinations import Destination
from providers.http.framing import FramedAnswer
from providers.http.watchdog import current_watchdog

POOL_CONNECTIONS = 8
POOL_KEYS = 128


class _WatchedConnectionMixin:
    """A connection whose socket the current call's watchdog watches: a new one as it is
    opened, a pooled one as it sends its next request. Its answers are FramedAnswers."""

    @property
    def response_class(self) -> partial[FramedAnswer]:
        return partial(FramedAnswer, connection=cast(HTTPConnection, self))

    def _new_conn(self) -> socket.socket:
        sock: socket.socket = super()._new_conn()  # type: ignore[misc]
        watchdog = current_watchdog.get()
        if watchdog is not None:
            watchdog.watch(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        watchdog = current_watchdog.get()
        if watchdog is not None and self.sock is not None:  # type: ignore[attr-defined]
            watchdog.watch(self.sock)  # type: ignore[attr-defined]
        super().request(*args, **kwargs)  # type: ignore[misc]


# http.client reads `response_class` where the stubs see an attribute: a property reads it.
class WatchedHTTPConnection(_WatchedConnectionMixin, HTTPConnection):  # type: ignore[misc]
    pass


class WatchedHTTPSConnection(_WatchedConnectionMixin, HTTPSConnection):  # type: ignore[misc]
    pass


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """Certificates checked against certifi's bundle only: SSL_CERT_FILE and the like in the
    environment are not read."""
    return ssl.create_default_context(cafile=certifi.where())


class _Pools:
    """This worker's connection pools, one per destination, address and pool key (whose calls
    a connection may carry), least recently used dropped beyond POOL_KEYS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: OrderedDict[tuple[object, ...], urllib3.HTTPConnectionPool] = OrderedDict()

    def get(
        self, destination: Destination, address: str, key: Hashable = ()
    ) -> urllib3.HTTPConnectionPool:
        pool_key = (destination.scheme, destination.host, destination.port, address, key)
        with self._lock:
            pool = self._pools.get(pool_key)
            if pool is not None:
                self._pools.move_to_end(pool_key)
                return pool
            pool = self._new(destination, address)
            self._pools[pool_key] = pool
            while len(self._pools) > POOL_KEYS:
                _, dropped = self._pools.popitem(last=False)
                dropped.close()
            return pool

    @staticmethod
    def _new(destination: Destination, address: str) -> urllib3.HTTPConnectionPool:
        common: dict[str, Any] = {"maxsize": POOL_CONNECTIONS, "block": False, "retries": False}
        pool: urllib3.HTTPConnectionPool
        if destination.scheme == "https":
            pool = urllib3.HTTPSConnectionPool(
                address,
                destination.port,
                server_hostname=destination.host,
                assert_hostname=destination.host,
                ssl_context=tls_context(),
                cert_reqs="CERT_REQUIRED",
                **common,
            )
            pool.ConnectionCls = WatchedHTTPSConnection
        else:
            pool = urllib3.HTTPConnectionPool(address, destination.port, **common)
            pool.ConnectionCls = WatchedHTTPConnection
        return pool

    def clear(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()


pools = _Pools()
