"""What gunicorn answers itself, before Django sees a request: problem details, never HTML.

gunicorn refuses a request it cannot parse (a request line over its limit: 414; a header field
or section over its limits: 431; a bad request line, header or chunk, or chunked with a
Content-Length: 400) with `gunicorn.util.write_error`, which writes an HTML page.
`install()`, called in each worker by gunicorn.conf.py, puts `write_problem` in its place: the
same status, as problem details with the code of `services/exceptions.py`. gunicorn's message
(which can quote what the client sent) goes nowhere.
"""

from __future__ import annotations

import socket

from gunicorn import util

from services.api.wsgi import problem_before_django
from services.exceptions import (
    HeaderTooLarge,
    InternalError,
    MalformedRequest,
    ProblemError,
    UriTooLong,
)

# gunicorn's statuses, with the problem each one is. Its rarer refusals of a client's message
# (501 for a transfer coding it does not support, 417 for an Expect it does not meet) are 400
# bad_request too: one closed set of codes, and a client that can act on each.
PROBLEMS: dict[int, type[ProblemError]] = {
    414: UriTooLong,
    431: HeaderTooLarge,
}


def write_problem(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """`gunicorn.util.write_error`'s signature; `reason` and `mesg` are not sent."""
    problem = PROBLEMS.get(status_int) or (MalformedRequest if status_int < 500 else InternalError)
    status, headers, body = problem_before_django(problem)
    head = "".join(f"{name}: {value}\r\n" for name, value in [*headers, ("Connection", "close")])
    util.write_nonblock(sock, f"HTTP/1.1 {status}\r\n{head}\r\n".encode("latin-1") + body)


def install() -> None:
    util.write_error = write_problem
