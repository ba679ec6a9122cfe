"""Well-formed, exactly framed answers only. An answer whose head is malformed is refused
(`Failure.BAD_ANSWER`) before its body is read and its connection closed: a Transfer-Encoding
other than `chunked`, a Content-Length that does not say one length, a control character in the
head (a bare CR included, which the header parser would take for the end of a line), a header
name that is not a token, a line that does not parse. A connection is kept only when its answer
ended exactly where its framing (Content-Length or chunked) said and nothing followed."""

from __future__ import annotations

import http.client
import io
import re
import socket
import ssl
from contextlib import suppress
from typing import Any

from urllib3.connection import HTTPConnection

from providers.http.failures import Failure, OutboundError

# The buffer an answer is read through: its head's lines and a chunked body's size lines pass
# through it, a read of the body with nothing buffered goes to the socket directly. A streamed
# answer holds it as long as it stays open: http.client's own 8 KiB cost 200 streams on one
# worker about 3 KiB more each (scripts/bench_proxy.py).
ANSWER_BUFFER = 2 * 1024


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

    def __init__(self, reader: io.BufferedReader) -> None:
        self.reader = reader
        self.lines: list[bytes] = []

    def readline(self, limit: int = -1) -> bytes:
        line = self.reader.readline(limit)
        self.lines.append(line)
        return line

    def __getattr__(self, name: str) -> Any:
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


def _more_after(reader: io.BufferedReader, sock: socket.socket) -> bool:
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


# http.client's own bounds of a head (private there, so its stubs leave them out).
_MAXHEADERS: int = http.client._MAXHEADERS  # type: ignore[attr-defined]
_MAXLINE: int = http.client._MAXLINE  # type: ignore[attr-defined]


def _header_fields(reader: _HeadRecorder) -> list[tuple[str, str]]:
    """The header lines of one head, up to its empty line, as (name, value): a folded line's
    text joins the value before it with a space, as the e-mail parser joins it, and with the
    line feed itself after a line that ended at a bare LF (which `open_answer` then refuses,
    as it did the e-mail parser's value). At most http.client's own bounds: a line of 64 KiB,
    100 lines."""
    fields: list[tuple[str, str]] = []
    ended = b"\r\n"
    for _ in range(_MAXHEADERS + 1):
        line = reader.readline(_MAXLINE + 1)
        if len(line) > _MAXLINE:
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
    raise http.client.HTTPException(f"got more than {_MAXHEADERS} headers")


class FramedAnswer(http.client.HTTPResponse):
    """An answer read from a pooled connection, which it closes unless it ended exactly:
    anything read or waiting after the end its framing says, both Content-Length and chunked,
    or a refused head. A head `_sound_head` refuses raises OutboundError(BAD_ANSWER) before a
    byte of the body is read (http.client then closes the answer, urllib3 the connection)."""

    def __init__(
        self, sock: socket.socket, *args: Any, connection: HTTPConnection, **kwargs: Any
    ) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()  # http.client's reader, with its 8 KiB buffer
        # A buffered reader; the stubs type makefile's answer by its mode only when it is a literal.
        self.fp = sock.makefile("rb", buffering=ANSWER_BUFFER)  # type: ignore[assignment]
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
        self.chunked = coding is not None and coding.lower() == "chunked"
        self.chunk_left = None
        # http.client's private methods and attributes below: its stubs leave them out.
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.msg.get("content-length")
        if length and not self.chunked:
            with suppress(ValueError):
                self.length = int(length) if int(length) >= 0 else None
        if (
            self.status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
            or 100 <= self.status < 200
            or self._method == "HEAD"  # type: ignore[attr-defined]
        ):
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True

    # http.client calls this where the answer ends as its framing says (and on close).
    def _close_conn(self) -> None:
        reader = self.fp
        if reader is not None and not self.doubtful:
            self.doubtful = _more_after(reader, self._sock)
        super()._close_conn()  # type: ignore[misc]
        if self.doubtful:
            self._connection.close()
