"""`Prefer: wait=N` (RFC 7240): a brokered call that would be answered `approval_required` or
`approval_pending` is held until a member decides or N seconds pass (N cut to
CREDVAULT_APPROVAL_MAX_WAIT), then answered as the gate says then, with
`Preference-Applied: wait=N`. A value that is not a number of seconds is ignored, as RFC 7240
says of a preference a server does not understand; the wait preference never reaches the
provider (any other preference does).

A held call gives its database connection back while it waits and stays in its token's
in-flight slot. Each process has one waiting room (`ROOM`): a decision made in this process
wakes its waiters at once (`decided`, after the decision's commit); one poller, running only
while someone waits, asks the database every POLL_SECONDS which of the waited approvals were
decided (or expired) by another process, in one query for all of them, and gives its own
connection back after each. `threading.Event` serves threads and, under gevent's monkey
patching, greenlets alike.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from services.audit import Actor
from services.consent.approvals import AskedCall, admit_call
from services.exceptions import ApprovalPending, ApprovalRequired, ProblemError
from services.models import Approval, ApprovalStatus
from services.storage.connections import give_back_connections

logger = logging.getLogger("credvault.consent")

# How often the poller asks the database for decisions made by another process.
POLL_SECONDS = 0.5
PREFER_HEADER = "prefer"
APPLIED_HEADER = "Preference-Applied"

# One preference of a Prefer header: commas inside a quoted value do not separate.
_PREFERENCE = re.compile(r'(?:[^,"]|"(?:[^"\\]|\\.)*")+')
_SECONDS = re.compile(r"[0-9]{1,12}")


def _name_and_value(preference: str) -> tuple[str, str]:
    token, _, value = preference.split(";", 1)[0].partition("=")
    return token.strip().lower(), value.strip().strip('"')


def read_wait(headers: Mapping[str, str]) -> tuple[int, Mapping[str, str]]:
    """The seconds the agent asks to wait (0: no wait; cut to CREDVAULT_APPROVAL_MAX_WAIT),
    and its headers less the wait preference (the same mapping when it has no Prefer header).
    Of a preference given twice the first counts (RFC 7240 2)."""
    name = next((key for key in headers if key.lower() == PREFER_HEADER), None)
    if name is None:
        return 0, headers
    seconds: int | None = None
    kept = []
    for preference in _PREFERENCE.findall(headers[name]):
        asked, value = _name_and_value(preference)
        if asked != "wait":
            if asked:
                kept.append(preference.strip())
        elif seconds is None:
            seconds = int(value) if _SECONDS.fullmatch(value) else 0
    others = {key: value for key, value in headers.items() if key != name}
    if kept:
        others[name] = ", ".join(kept)
    return min(seconds or 0, settings.CREDVAULT_APPROVAL_MAX_WAIT), others


@dataclass(frozen=True, slots=True)
class Admitted:
    """The approval a call goes under, and the `Preference-Applied` value when it waited."""

    approval_id: str
    applied: str = ""


def admit_waiting(
    *, actor: Actor, call: AskedCall, rule: Mapping[str, Any], named: str, wait: int
) -> Admitted:
    """`admit_call`, held up to `wait` seconds while the approval is not decided. Any answer
    after a wait carries `Preference-Applied`."""
    deadline = time.monotonic() + wait
    applied = ""
    while True:
        try:
            return Admitted(admit_call(actor=actor, call=call, rule=rule, named=named), applied)
        except (ApprovalRequired, ApprovalPending) as problem:
            left = deadline - time.monotonic()
            if left <= 0:
                _apply(problem, applied)
                raise
            waited_on = problem.approval_id
        except ProblemError as problem:
            _apply(problem, applied)
            raise
        # Outside the handler: the problem's traceback, and the frames it keeps, are freed.
        applied = f"wait={wait}"
        give_back_connections()
        ROOM.wait(waited_on, timeout=left)


def _apply(problem: ProblemError, applied: str) -> None:
    if applied:
        problem.headers[APPLIED_HEADER] = applied


def decided(approval_id: str) -> None:
    """Wake this process's calls waiting on `approval_id` (after its decision's commit)."""
    ROOM.wake([approval_id])


def decided_among(approval_ids: Iterable[str]) -> list[str]:
    """Which of `approval_ids` are no longer pending, or pending past their expiry."""
    return list(
        Approval.objects.filter(id__in=list(approval_ids))
        .exclude(status=ApprovalStatus.PENDING, expires_at__gt=timezone.now())
        .values_list("id", flat=True)
    )


class WaitingRoom:
    """The calls of one process waiting on approvals, and the poller that wakes them."""

    def __init__(self, poll_seconds: float = POLL_SECONDS) -> None:
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = {}
        self._poller: threading.Thread | None = None
        self._pid = os.getpid()

    def waiting(self) -> int:
        """How many calls wait (for the measurements and the tests)."""
        with self._lock:
            return sum(len(events) for events in self._waiters.values())

    def wait(self, approval_id: str, *, timeout: float) -> bool:
        """Wait until `approval_id` is decided (True) or `timeout` seconds pass (False)."""
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(approval_id, set()).add(event)
            if self._pid != os.getpid():  # a forked child: its parent's poller is not here
                self._pid, self._poller = os.getpid(), None
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll, name="credvault-waiting-room", daemon=True
                )
                self._poller.start()
        try:
            return event.wait(timeout)
        finally:
            with self._lock:
                events = self._waiters.get(approval_id)
                if events is not None and event in events:
                    events.discard(event)
                    if not events:
                        del self._waiters[approval_id]

    def wake(self, approval_ids: Iterable[str]) -> None:
        with self._lock:
            for approval_id in approval_ids:
                for event in self._waiters.pop(approval_id, ()):
                    event.set()

    def _poll(self) -> None:
        """Until no call waits: every poll_seconds, one query for every waited approval."""
        while True:
            time.sleep(self.poll_seconds)
            with self._lock:
                if not self._waiters:
                    self._poller = None
                    return
                waited = list(self._waiters)
            try:
                self.wake(decided_among(waited))
            except DatabaseError as exc:
                logger.warning("waiting room poll failed: %s", type(exc).__name__)
            finally:
                give_back_connections()


ROOM = WaitingRoom()
