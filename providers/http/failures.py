"""What an outbound call that got no usable answer reports: one `Failure` kind, in an
`OutboundError` whose text never holds a URL, a header or anything a library's exception said."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import urllib3

if TYPE_CHECKING:
    from providers.http.watchdog import Watchdog


class Failure(StrEnum):
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    UNAVAILABLE = "unavailable"
    ADDRESS_REFUSED = "address_refused"
    BAD_ANSWER = "bad_answer"


class OutboundError(Exception):
    """A call that got no usable answer. `kind` says why; nothing else is kept."""

    def __init__(self, kind: Failure) -> None:
        super().__init__(kind.value)
        self.kind = kind


def failure_of(exc: BaseException, watchdog: Watchdog) -> OutboundError:
    """The one kind a failed exchange reports: a timeout once the deadline passed (a shut socket
    fails in many ways) or a read waited out its silence, else the OutboundError's own kind,
    else `UNAVAILABLE`. Nothing the library said survives: its text can hold a URL."""
    if watchdog.fired:
        return OutboundError(Failure.TIMEOUT)
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        # A refused connection: urllib3 counts it among its connect timeouts.
        return OutboundError(Failure.UNAVAILABLE)
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return OutboundError(Failure.TIMEOUT)
    if isinstance(exc, OutboundError):
        return OutboundError(exc.kind)
    return OutboundError(Failure.UNAVAILABLE)
