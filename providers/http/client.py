"""The one strict outbound HTTP client: every request credvault sends to a provider (a
verification check, a brokered call, an OAuth token request) goes through `send` (the whole
answer) or `open_answer` (its head, then its body as it arrives). No redirect is followed, TLS
is verified, proxies, CA bundles and netrc from the environment are ignored, nothing is retried;
at most `max_answer` bytes of an answer are read. Each rule and the module that keeps it:
docs/security.md, "The outbound client"."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

import urllib3

from providers.http import library_logs  # noqa: F401  (installs its filter on urllib3's loggers)
from providers.http.connections import pools
from providers.http.destinations import Destination
from providers.http.failures import Failure, OutboundError, failure_of
from providers.http.resolving import address_for
from providers.http.watchdog import Watchdog, current_watchdog

READ_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


# What runs before every request waits on its provider. The services app gives the request's
# database connections back there (services/apps.py), so that no wait on a provider holds a
# connection that other requests need; providers itself knows nothing of the database.
_before_waiting: list[Callable[[], None]] = []


def before_waiting(hook: Callable[[], None]) -> None:
    """Run `hook` before each request sent to a provider (once per hook)."""
    if hook not in _before_waiting:
        _before_waiting.append(hook)


# Methods whose requests carry no body (RFC 9110 9.3.1, 9.3.2, 9.3.7): a provider may read one
# sent anyway as the start of the next request on the connection.
BODILESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class OpenAnswer:
    """A provider's answer whose head has arrived: its status and headers, and its body read
    piece by piece as it arrives (`read`), or whole (`read_all`).

    Each read waits at most the call's `timeout` for the next bytes; the whole call ends at its
    watchdog's deadline; more than `max_answer` bytes of body is `TOO_LARGE`. At the body's end
    the connection goes back to its pool (when its framing held, `FramedAnswer`); an answer
    closed or failed before its end closes its connection."""

    __slots__ = ("_left", "_open", "_read_ahead", "_response", "_watchdog", "headers", "status")

    def __init__(
        self, response: urllib3.BaseHTTPResponse, watchdog: Watchdog, max_answer: int
    ) -> None:
        self.status: int = response.status
        self.headers: list[tuple[str, str]] = list(response.headers.iteritems())
        self._response = response
        self._watchdog = watchdog
        self._left = max_answer
        self._open = True
        self._read_ahead: bytes | None = None

    def __repr__(self) -> str:
        return f"OpenAnswer({self.status})"

    @property
    def declared_length(self) -> int | None:
        """The body's length as its Content-Length says, when it says one (not chunked)."""
        if self._response.chunked:
            return None
        length = self._response.headers.get("content-length", "")
        return int(length) if length.isdigit() else None

    def read(self) -> bytes:
        """The body's next bytes as they arrive (at most READ_CHUNK), `b""` at its end.
        Raises OutboundError, the answer closed."""
        if self._read_ahead is not None:
            piece, self._read_ahead = self._read_ahead, b""
            return piece
        if not self._open:
            return b""
        try:
            piece = self._response.read1(READ_CHUNK)
            if not piece and self._watchdog.fired:
                # A shut socket reads as the end of an answer delimited by its connection.
                raise OutboundError(Failure.TIMEOUT)
            self._left -= len(piece)
            if self._left < 0:
                raise OutboundError(Failure.TOO_LARGE)
        except Exception as exc:
            self.close()
            raise failure_of(exc, self._watchdog) from None
        if not piece:
            self._open = False
            self._response.release_conn()
            self._watchdog.finish()
        return piece

    def read_all(self) -> bytes:
        """The whole body (at most `max_answer` bytes). Raises OutboundError."""
        pieces = []
        while piece := self.read():
            pieces.append(piece)
        return b"".join(pieces)

    def read_ahead(self) -> None:
        """Read the whole body now (at most `max_answer` bytes), so that the connection is
        done with; `read` then gives it from memory. Raises OutboundError."""
        self._read_ahead = self.read_all()

    def close(self) -> None:
        """End the answer where it is: its connection is closed, never pooled, unless the body
        was read to its end."""
        if self._open:
            self._open = False
            self._response.close()  # never back to the pool with an unread answer on it
            self._watchdog.finish()


def open_answer(
    *,
    destination: Destination,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes | None,
    timeout: float,
    max_duration: float,
    max_answer: int,
    pool_key: Hashable = (),
) -> OpenAnswer:
    """Send one request to `destination` (`target`: the path under its host, with the query)
    and wait for its answer's head: at most `timeout` seconds from the start, then at most
    `timeout` for each of the body's reads and `max_duration` seconds for the whole call. An
    answer whose Content-Length is over `max_answer` is refused before its body. Raises
    OutboundError.

    `pool_key` says whose calls the connection may carry afterwards: a brokered call gives its
    account and service; `()`, the destination's shared pool, is for requests credvault
    composes whole (a verification check, an OAuth token request)."""
    if body and method.upper() in BODILESS_METHODS:
        raise ValueError("a GET, HEAD or OPTIONS request carries no body")
    for hook in _before_waiting:
        hook()
    watchdog = Watchdog(timeout)
    token = current_watchdog.set(watchdog)
    try:
        address = address_for(destination, seconds=watchdog.remaining())
        pool = pools.get(destination, address, pool_key)
        response = pool.urlopen(
            method,
            target,
            body=body,
            headers={**headers, "Host": destination.authority},
            redirect=False,
            retries=False,
            preload_content=False,
            decode_content=True,
            assert_same_host=False,
            timeout=urllib3.Timeout(connect=watchdog.remaining(), read=timeout),
        )
    except BaseException as exc:
        watchdog.finish()
        if isinstance(exc, Exception):
            raise failure_of(exc, watchdog) from None
        raise
    finally:
        current_watchdog.reset(token)
    answer = OpenAnswer(response, watchdog, max_answer)
    declared = answer.declared_length
    if any("\n" in value or "\r" in value for _, value in answer.headers):
        # A value folded over lines that end at a bare LF keeps it once parsed.
        answer.close()
        raise OutboundError(Failure.BAD_ANSWER)
    if declared is not None and declared > max_answer:
        answer.close()
        raise OutboundError(Failure.TOO_LARGE)
    if watchdog.fired:
        answer.close()
        raise OutboundError(Failure.TIMEOUT)
    watchdog.extend(max_duration)
    return answer


def send(
    *,
    destination: Destination,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes | None,
    timeout: float,
    max_answer: int,
    pool_key: Hashable = (),
) -> Answer:
    """`open_answer`, its body read whole, the whole call within `timeout` seconds. Raises
    OutboundError."""
    answer = open_answer(
        destination=destination,
        method=method,
        target=target,
        headers=headers,
        body=body,
        timeout=timeout,
        max_duration=timeout,
        max_answer=max_answer,
        pool_key=pool_key,
    )
    return Answer(answer.status, answer.headers, answer.read_all())
