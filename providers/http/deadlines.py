"""One thread per process that runs a callback when its deadline passes.

Two things in credvault end what is late by shutting a socket down: the WSGI wrapper, a request
body that has not arrived in time (`services/api/wsgi.py`), and the outbound client, a call to a
provider past its bound (`providers/http/watchdog.py`). Both schedule here. `schedule()` costs a
lock and a heap push, not a thread or a timer per request; the thread wakes when the earliest
deadline still scheduled passes.

Once `cancel()` has returned, the callback is not running and never will: callbacks run under
the scheduler's lock, so they must be short (a `shutdown()` of a few sockets).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("credvault.deadlines")


class Deadline:
    """A callback scheduled for one moment, until cancelled."""

    __slots__ = ("_scheduler", "callback", "cancelled")

    def __init__(self, scheduler: Deadlines, expire: Callable[[], None]) -> None:
        self._scheduler = scheduler
        self.callback = expire
        self.cancelled = False

    def cancel(self) -> None:
        with self._scheduler.lock:
            self.cancelled = True


class Deadlines:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, seconds: float, expire: Callable[[], None]) -> Deadline:
        """Run `expire` in `seconds` unless the returned Deadline is cancelled first."""
        deadline = Deadline(self, expire)
        when = time.monotonic() + seconds
        with self.lock:
            if self._thread is None or not self._thread.is_alive():
                # Started in the process that first needs it: never carried across a fork.
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (when, next(self._order), deadline))
            if earliest is None or when < earliest:
                self.lock.notify()
        return deadline

    def _run(self) -> None:
        with self.lock:
            while True:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self.lock.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self.lock.wait(wait)
                    continue
                _, _, due = heapq.heappop(self._heap)
                due.cancelled = True
                try:
                    due.callback()
                except Exception:  # one failing callback must not stop the others' deadlines
                    logger.exception("a deadline's callback failed")


deadlines = Deadlines()
