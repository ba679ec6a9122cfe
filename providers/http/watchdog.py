"""The whole-call deadline of an outbound call: per-read timeouts never trip on a server that
drips a byte a second, so a watchdog shuts the call's sockets down when its head has not come
within `timeout` or the whole call passes its bound. Each watchdog is an entry in the process's
one deadline thread (`providers.http.deadlines`), not a thread per call."""

from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import suppress
from contextvars import ContextVar

from providers.http.deadlines import deadlines


class Watchdog:
    """Shuts down every socket of one call when its deadline passes (`providers.http.deadlines`).

    Each socket is watched through a duplicate of it: shutting the duplicate down ends the
    connection for the original too (a blocked read returns at once), and the duplicate's own
    descriptor cannot be reused by anything else before `finish()` closes it.
    """

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._finished = False
        self.fired = False
        self.started_at = time.monotonic()
        self.ends_at = self.started_at + seconds
        self._deadline = deadlines.schedule(seconds, self._fire)

    def extend(self, seconds: float) -> None:
        """Move the deadline to `seconds` after the watchdog started: a streamed answer's
        whole bound, once its head came within the first one. Nothing moves once it fired."""
        self._deadline.cancel()  # once returned, `_fire` is not running and never will
        if self.fired or self._finished:
            return
        self.ends_at = self.started_at + seconds
        self._deadline = deadlines.schedule(self.ends_at - time.monotonic(), self._fire)

    def remaining(self) -> float:
        return max(0.001, self.ends_at - time.monotonic())  # 0 would make a socket non-blocking

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self.fired or self._finished:
                # Opened after the deadline: the connection must carry nothing, so it ends
                # before a byte of the request is sent.
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                return
            # A duplicate of the descriptor, as a plain socket: a TLS socket has no dup().
            self._sockets.append(socket.socket(fileno=os.dup(sock.fileno())))

    def _fire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.fired = True
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._deadline.cancel()
        with self._lock:
            self._finished = True
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


current_watchdog: ContextVar[Watchdog | None] = ContextVar("credvault_watchdog", default=None)
