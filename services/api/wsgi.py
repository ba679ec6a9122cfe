"""The WSGI wrapper around Django: every request body is read whole, within a deadline, and
checked against its framing before Django sees the request (RFC 9112).

- A body with a Content-Length up to its limit (64 KiB; a brokered call's
  CREDVAULT_PROXY_MAX_BODY) is read to its end; one the client stops short of is never
  processed (400 `bad_request`), since Django would read a truncated JSON that happens to be
  valid as the whole body.
- A chunked body is read up to one byte past the limit when the server marks the end of the
  input (`wsgi.input_terminated`, as gunicorn does), else 411; a body over the limit is left
  unread for the view's 413.
- Reading takes at most CREDVAULT_BODY_TIMEOUT seconds in all: then the socket's reading side is
  shut (`BodyWatch`) and the answer is 408 `request_timeout`.

Django then reads the body from memory: the view's strict reader is unchanged.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from django.conf import settings

from providers.http.deadlines import deadlines
from services.broker import limits
from services.exceptions import (
    BodyTimeout,
    LengthRequired,
    MalformedRequest,
    ProblemError,
    problem_document,
)
from services.logs import escaped_path

# The most an API request's body may hold (`body_limit`); the strict reader refuses a longer
# one with 413.
MAX_BODY_BYTES = 64 * 1024
_READ_SIZE = 16 * 1024

logger = logging.getLogger("credvault.access")


def problem_before_django(
    problem: type[ProblemError],
) -> tuple[str, list[tuple[str, str]], bytes]:
    """The status line, headers and body of `problem`'s problem details, for an answer written
    before Django: by this wrapper, or by gunicorn itself (`services/api/serving.py`)."""
    status = HTTPStatus(problem.status_code)
    body = problem_document(status.value, problem.default_code, str(problem.default_detail))
    headers = [
        ("Content-Type", "application/problem+json"),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
    ]
    return f"{status.value} {status.phrase}", headers, body


class BodyWatch:
    """Shuts the reading side of a socket whose body is late (`providers.http.deadlines`). A
    blocked `recv` then returns at once with no data, so the reader sees the body end early."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self.sock = sock
        self.expired = False
        self._deadline = deadlines.schedule(seconds, self._expire)

    def _expire(self) -> None:
        self.expired = True
        with contextlib.suppress(OSError):  # the client is gone already
            self.sock.shutdown(socket.SHUT_RD)

    def __enter__(self) -> BodyWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._deadline.cancel()


class IncompleteBody(Exception):
    """The body ended before its framing said it would (no data in it)."""


def read_body(environ: dict[str, Any], limit: int, expected: int | None) -> bytes:
    """Read up to `limit` bytes of the body; `expected` (the Content-Length) must all come."""
    stream = environ["wsgi.input"]
    parts, received = [], 0
    while received < limit:
        try:
            part = stream.read(min(_READ_SIZE, limit - received))
        except Exception as exc:  # gunicorn's reader: a bad chunk, or no more data
            raise IncompleteBody(type(exc).__name__) from None
        if not part:
            break
        parts.append(part)
        received += len(part)
    if expected is not None and received < expected:
        raise IncompleteBody(f"{received} of {expected} bytes")
    return b"".join(parts)


PROXY_PATH_PREFIX = "/api/v1/agent/proxy/"
# On credvault's own answers to a brokered call, the problem's code: never on the provider's.
CREDVAULT_ERROR_HEADER = "X-Credvault-Error"


# The most a POST to the MCP server may hold: a call_api's body of CREDVAULT_PROXY_MAX_BODY
# travels inside it as JSON text.
MCP_MAX_BODY = 1024 * 1024
MCP_PATH = "/mcp"
ADMIN_PATH_PREFIX = "/admin/"


def body_limit(environ: dict[str, Any]) -> int:
    """The most a request's body may hold: a brokered call's, the MCP server's, else the
    API's. The one answer every check of a body's size reads (this wrapper, the views)."""
    path = environ.get("PATH_INFO", "")
    if path.startswith(PROXY_PATH_PREFIX):
        return limits.max_body()
    if path == MCP_PATH:
        return MCP_MAX_BODY
    return MAX_BODY_BYTES


class RequestBodyMiddleware:
    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        length = environ.get("CONTENT_LENGTH") or ""
        most = body_limit(environ)
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() and not length:
            if not environ.get("wsgi.input_terminated"):
                return self._problem(start_response, LengthRequired, environ)
            limit, expected = most + 1, None
        elif length.isdigit() and 0 < int(length) <= most:
            limit = expected = int(length)
        else:
            return self.app(environ, start_response)  # no body, or one refused unread (413)
        # Under gunicorn, the socket whose reading side the deadline shuts; elsewhere (the test
        # client) the body is in memory already.
        sock = environ.get("gunicorn.socket")
        watch = BodyWatch(sock, settings.CREDVAULT_BODY_TIMEOUT) if sock else None
        try:
            with watch or contextlib.nullcontext():
                body = read_body(environ, limit, expected)
        except IncompleteBody as exc:
            late = watch is not None and watch.expired
            logger.warning(
                "%s %s dropped: its body %s (%s)",
                environ.get("REQUEST_METHOD"),
                escaped_path(environ.get("PATH_INFO", "")),
                "did not arrive in time" if late else "ended early",
                exc,
            )
            return self._problem(start_response, BodyTimeout if late else MalformedRequest, environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)

    @staticmethod
    def _problem(
        start_response: Callable[..., Any],
        problem: type[ProblemError],
        environ: dict[str, Any],
    ) -> list[bytes]:
        status, headers, body = problem_before_django(problem)
        if environ.get("PATH_INFO", "").startswith(PROXY_PATH_PREFIX):
            headers.append((CREDVAULT_ERROR_HEADER, problem.default_code))
        start_response(status, headers)
        return [body]
