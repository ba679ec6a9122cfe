"""The one strict outbound HTTP client: every request credvault sends to a provider (a
verification check, a brokered call, an OAuth token request) goes through here.

- **Where.** A `Destination` comes from the catalog or the server's own configuration, never
  from a request. Its name is resolved once, and that address is the one connected to (no
  second lookup an attacker's DNS could answer differently); TLS is checked against the name.
  An address that is not public (private, loopback, link-local and so the cloud metadata
  address, shared, multicast, unspecified, reserved) is refused, unless the host comes from
  server-side configuration (`Destination.configured`: an override of
  CREDVAULT_PROVIDER_BASE_URLS, an entry of CREDVAULT_EXTRA_CATALOG, or a host
  CREDVAULT_OUTBOUND_ALLOWED_HOSTS names, which `named_destination` lets a host pattern or a
  followed redirect reach).
- **How.** No redirect is followed (a 3xx comes back as it is), TLS is verified against
  certifi's bundle, proxies, CA bundles and netrc from the environment are ignored, nothing is
  retried. The exchange is bounded by deadlines: a watchdog shuts its socket down when the
  answer's head has not come within `timeout`, or when the whole call passes its bound
  (`max_duration`, which `send` sets to `timeout`), because per-read timeouts never trip on a
  server that drips a byte a second; each read of the body waits at most `timeout` besides. A
  deadline is an entry in the process's one deadline thread (`providers.deadlines`), not a
  thread per call. A name lookup is waited for only until the deadline (a literal address is
  not looked up). At most `max_answer` bytes of an answer are read.
- **Whole or piece by piece.** `send` returns the whole answer; `open_answer` returns once
  the head has come, and its body is read as it arrives (a brokered call passes a stream on).
- **Pooled, and only after an exact answer.** Each worker keeps its connections open for the
  next call (keep-alive, at most POOL_CONNECTIONS idle per pool and POOL_KEYS pools), so that a
  call costs one request, not a new TCP and TLS handshake. A pool serves one destination and
  one `pool_key` (a brokered call's account and service): a connection that a call left in a
  doubtful state can only ever carry the same account's calls to the same service. A
  connection goes back to its pool only when its answer ended exactly where its framing
  (Content-Length or chunked) said and nothing was read after it; otherwise it is closed.
- **Well-formed answers only.** An answer whose head is malformed is refused
  (`Failure.BAD_ANSWER`) before its body is read, and its connection closed: a
  Transfer-Encoding other than `chunked`, a Content-Length that does not say one length, a
  control character anywhere in the head (a bare CR included, which the header parser would
  take for the end of a line), a header name that is not a token, a line that does not parse.
  No GET, HEAD or OPTIONS request carries a body (a provider may read one as the start of
  another request).
- **Silent libraries.** urllib3's log records keep their words but lose their arguments and
  their exception: a URL (Telegram's token is in its path), a header, a malformed answer's
  lines can each hold a credential.

Every failure is an `OutboundError` of one kind; its text never holds a URL, a header or
anything the exception of the library said.
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import os
import re
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache, partial
from urllib.parse import urlsplit

import certifi
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from credvault.configuration import parse_allowed_hosts
from providers.addresses import is_public
from providers.deadlines import deadlines

POOL_CONNECTIONS = 8
POOL_KEYS = 128
LOOKUP_THREADS = 8
READ_CHUNK = 64 * 1024
# The buffer an answer is read through: its head's lines and a chunked body's size lines pass
# through it, a read of the body with nothing buffered goes to the socket directly. A streamed
# answer holds it as long as it stays open: http.client's own 8 KiB cost 200 streams on one
# worker about 3 KiB more each (scripts/bench_proxy.py).
ANSWER_BUFFER = 2 * 1024


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


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a call goes: scheme, host and port, the base path every call stays under, and
    whether the server's own configuration named the host (then it may be a private one)."""

    scheme: str
    host: str
    port: int
    base_path: str
    configured: bool

    @classmethod
    def from_base_url(cls, base_url: str, *, configured: bool) -> Destination:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a base URL is an http(s) URL with a host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), configured)

    @property
    def authority(self) -> str:
        """The Host header: the name, with the port when it is not the scheme's own."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@lru_cache(maxsize=4)
def _allowed_hosts(raw: str) -> frozenset[tuple[str, int | None]]:
    return parse_allowed_hosts(raw)


def host_allowed(host: str, port: int) -> bool:
    """Whether CREDVAULT_OUTBOUND_ALLOWED_HOSTS names `host` (with any port, or this one)."""
    from django.conf import settings

    allowed = _allowed_hosts(settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS)
    host = host.lower()
    return (host, None) in allowed or (host, port) in allowed


def named_destination(url: str) -> Destination | None:
    """Where a URL that no configuration chose may take a call (a host a catalog pattern
    matched, a redirect credvault follows): an `https` URL, to public addresses only; or any
    http(s) URL whose host CREDVAULT_OUTBOUND_ALLOWED_HOSTS names (an internal service, a
    test's stand-in), which may then be private. None for any other URL."""
    try:
        destination = Destination.from_base_url(url, configured=False)
    except ValueError:
        return None
    if host_allowed(destination.host, destination.port):
        return replace(destination, configured=True)
    return destination if destination.scheme == "https" else None


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


# --- where: one resolution, public addresses only ------------------------------------------


def _resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, as the system resolver gives them (tests put their own)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


resolver: Callable[[str, int], list[str]] = _resolve


# Name lookups run here, so that a call waits for one only as long as its deadline allows: no
# socket timeout interrupts getaddrinfo. A lookup that hangs holds one of these threads (a
# greenlet under gevent) until the system resolver gives up; the call has returned long before.
_lookups = ThreadPoolExecutor(max_workers=LOOKUP_THREADS, thread_name_prefix="credvault-lookup")


def resolve_within(host: str, port: int, seconds: float) -> list[str]:
    """`resolver(host, port)`, waited for at most `seconds`. Raises OutboundError."""
    try:
        return [str(ipaddress.ip_address(host))]  # a literal address is its own answer
    except ValueError:
        pass
    try:
        return _lookups.submit(resolver, host, port).result(timeout=seconds)
    except FutureTimeout:
        raise OutboundError(Failure.TIMEOUT) from None
    except (OSError, UnicodeError):
        raise OutboundError(Failure.UNAVAILABLE) from None


def address_for(destination: Destination, *, seconds: float) -> str:
    """The one address this call connects to, its name looked up within `seconds`."""
    addresses = resolve_within(destination.host, destination.port, seconds)
    if not addresses:
        raise OutboundError(Failure.UNAVAILABLE)
    if not destination.configured and not all(is_public(a) for a in addresses):
        # One private answer among public ones is how rebinding starts: refuse them all.
        raise OutboundError(Failure.ADDRESS_REFUSED)
    return addresses[0]


# --- the whole-call deadline ----------------------------------------------------------------


class Watchdog:
    """Shuts down every socket of one call when its deadline passes (`providers.deadlines`).

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


# --- the answer: well-formed, and exactly framed ---------------------------------------------

# An answer's head as it came, each line sound: status lines (a 100 Continue's head before the
# answer's own), then header lines whose name is a token (RFC 9110 5.6.2), or that continue
# the line before (obs-fold), each ending at CRLF or LF and holding no control character but
# HTAB; a bare CR, which the header parser would take for the end of a line, is refused too.
_TEXT = rb"[\t\x20-\x7e\x80-\xff]*"
_EOL = rb"\r?\n"
_FIELD = rb"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:|[ \t])" + _TEXT + _EOL
_SOUND_HEAD = re.compile(rb"(?:HTTP/" + _TEXT + _EOL + rb"(?:" + _FIELD + rb")*" + _EOL + rb")+")


class _HeadRecorder:
    """The answer's reader while its head is read: each line is kept as it came, so that a
    control character is seen before the header parser splits a line at a bare CR."""

    def __init__(self, reader) -> None:
        self.reader = reader
        self.lines: list[bytes] = []

    def readline(self, limit: int = -1) -> bytes:
        line = self.reader.readline(limit)
        self.lines.append(line)
        return line

    def __getattr__(self, name: str):
        return getattr(self.reader, name)


def _sound_head(lines: list[bytes], message: http.client.HTTPMessage) -> bool:
    """Whether an answer's head can be passed on and its framing trusted: every line sound
    (`_SOUND_HEAD`), a Transfer-Encoding of `chunked` alone if any, and a Content-Length that
    says one length if any."""
    if not _SOUND_HEAD.fullmatch(b"".join(lines)):
        return False
    codings = [
        token.strip().lower()
        for value in message.get_all("transfer-encoding") or ()
        for token in value.split(",")
    ]
    if codings and codings != ["chunked"]:
        return False
    lengths = {
        token.strip()
        for value in message.get_all("content-length") or ()
        for token in value.split(",")
    }
    return not lengths or (len(lengths) == 1 and lengths.pop().isdigit())


def _more_after(reader, sock: socket.socket) -> bool:
    """Whether anything follows an answer that has ended: bytes already read into `reader`'s
    buffer, or waiting on the socket. Looked at without waiting."""
    try:
        timeout = sock.gettimeout()
        sock.settimeout(0)
    except OSError:
        return True
    try:
        return bool(reader.peek(1))
    except ssl.SSLWantReadError:  # a TLS socket with nothing to read
        return False
    except (OSError, ValueError):
        return True
    finally:
        with suppress(OSError):
            sock.settimeout(timeout)


def _header_fields(reader) -> list[tuple[str, str]]:
    """The header lines of one head, up to its empty line, as (name, value): a folded line's
    text joins the value before it with a space, as the e-mail parser joins it, and with the
    line feed itself after a line that ended at a bare LF (which `open_answer` then refuses,
    as it did the e-mail parser's value). At most http.client's own bounds: a line of 64 KiB,
    100 lines."""
    fields: list[tuple[str, str]] = []
    ended = b"\r\n"
    for _ in range(http.client._MAXHEADERS + 1):
        line = reader.readline(http.client._MAXLINE + 1)
        if len(line) > http.client._MAXLINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return fields
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and fields:
            name, value = fields[-1]
            joint = " " if ended == b"\r\n" else "\n"
            fields[-1] = (name, f"{value}{joint}{text.strip()}")
        else:
            name, _, value = text.partition(":")
            fields.append((name, value.strip(" \t")))
        ended = line[-2:]
    raise http.client.HTTPException(f"got more than {http.client._MAXHEADERS} headers")


class FramedAnswer(http.client.HTTPResponse):
    """An answer read from a pooled connection, which it closes unless it ended exactly:
    anything read or waiting after the end its framing says, both Content-Length and chunked,
    or a refused head. A head `_sound_head` refuses raises OutboundError(BAD_ANSWER) before a
    byte of the body is read (http.client then closes the answer, urllib3 the connection)."""

    def __init__(self, sock, *args, connection: HTTPConnection, **kwargs) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()  # http.client's reader, with its 8 KiB buffer
        self.fp = sock.makefile("rb", buffering=ANSWER_BUFFER)
        self._sock = sock
        self._connection = connection
        self.doubtful = False

    def begin(self) -> None:
        """The head: its status line and header lines read as they came, judged by
        `_sound_head` before anything else, then split at each line's first colon here, not
        by the e-mail parser that http.client's own `begin` runs (which cost a brokered call
        about 3% of its instructions). The framing is read from it as http.client reads it
        (`_framed`)."""
        if self.headers is not None:
            return
        recorder = _HeadRecorder(self.fp)
        self.fp = recorder
        try:
            while True:
                version, status, reason = self._read_status()
                fields = _header_fields(recorder)
                if status != http.client.CONTINUE:
                    break
        finally:
            self.fp = recorder.reader
        message = http.client.HTTPMessage()
        for name, value in fields:
            message[name] = value
        if not _sound_head(recorder.lines, message):
            self.doubtful = True
            raise OutboundError(Failure.BAD_ANSWER)
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.code = self.status = status
        self.reason = reason.strip()
        self.headers = self.msg = message
        self._framed()
        # Both framings: the answer is read as chunked (RFC 9112 6.3), the connection not kept.
        self.doubtful = "transfer-encoding" in message and "content-length" in message

    def _framed(self) -> None:
        """Chunked, its length and whether the connection closes after it, from the head, as
        http.client's `begin` decides them."""
        coding = self.msg.get("transfer-encoding")
        self.chunked = bool(coding) and coding.lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = self.msg.get("content-length")
        if length and not self.chunked:
            with suppress(ValueError):
                self.length = int(length) if int(length) >= 0 else None
        if (
            self.status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
            or 100 <= self.status < 200
            or self._method == "HEAD"
        ):
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True

    # http.client calls this where the answer ends as its framing says (and on close).
    def _close_conn(self) -> None:
        reader = self.fp
        if reader is not None and not self.doubtful:
            self.doubtful = _more_after(reader, self._sock)
        super()._close_conn()
        if self.doubtful:
            self._connection.close()


class _WatchedConnectionMixin:
    """A connection whose socket the current call's watchdog watches: a new one as it is
    opened, a pooled one as it sends its next request. Its answers are FramedAnswers."""

    @property
    def response_class(self):
        return partial(FramedAnswer, connection=self)

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        watchdog = current_watchdog.get()
        if watchdog is not None:
            watchdog.watch(sock)
        return sock

    def request(self, *args, **kwargs):
        watchdog = current_watchdog.get()
        if watchdog is not None and self.sock is not None:  # type: ignore[attr-defined]
            watchdog.watch(self.sock)  # type: ignore[attr-defined]
        return super().request(*args, **kwargs)  # type: ignore[misc]


class WatchedHTTPConnection(_WatchedConnectionMixin, HTTPConnection):
    pass


class WatchedHTTPSConnection(_WatchedConnectionMixin, HTTPSConnection):
    pass


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


# --- pooled connections ---------------------------------------------------------------------


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
        self._pools: OrderedDict[tuple, urllib3.HTTPConnectionPool] = OrderedDict()

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
        common = {"maxsize": POOL_CONNECTIONS, "block": False, "retries": False}
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


# --- what the library logs -------------------------------------------------------------------

# A %-style conversion of a log format (`%s`, `%d`, `%(name)r`, ...), or `%%`.
_CONVERSION = re.compile(r"%(\([^)]*\))?[#0 +\-]*(\*|\d+)?(\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")


class WithheldArguments(logging.Filter):
    """A record of urllib3 keeps its own words (its format) and level, but every argument of
    the format reads `[withheld]` and its exception is dropped: urllib3 puts the request's URL
    (Telegram's token is in its path), a certificate, or a malformed answer's lines and the
    exception that names them there. Installed on each of urllib3's loggers, since a logger's
    filter sees only its own records."""

    def filter(self, record: logging.LogRecord) -> bool:
        words = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        record.msg = _CONVERSION.sub(
            lambda match: "%" if match.group(5) == "%" else "[withheld]", words
        )
        record.args = ()
        record.exc_info = record.exc_text = record.stack_info = None
        return True


URLLIB3_LOGGERS = (
    "urllib3",
    "urllib3.connection",
    "urllib3.connectionpool",
    "urllib3.contrib.emscripten.response",
    "urllib3.contrib.pyopenssl",
    "urllib3.contrib.socks",
    "urllib3.http2.connection",
    "urllib3.poolmanager",
    "urllib3.response",
    "urllib3.util.retry",
)


def withhold_library_arguments() -> None:
    """Put WithheldArguments on every logger of urllib3 (once each), those that exist now and
    those its modules create when they are imported."""
    existing = [name for name in logging.root.manager.loggerDict if name.startswith("urllib3.")]
    for name in {*URLLIB3_LOGGERS, *existing}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, WithheldArguments) for f in logger.filters):
            logger.addFilter(WithheldArguments())


withhold_library_arguments()


# --- the call -------------------------------------------------------------------------------

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

    def __init__(self, response, watchdog: Watchdog, max_answer: int) -> None:
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
