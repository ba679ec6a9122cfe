"""WSGI wrapper for request bodies sent without Content-Length (chunked transfer coding).

Django reads a body without Content-Length as empty. Here such a body is read up to one byte
past the 64 KiB limit, when the server marks the end of the input (`wsgi.input_terminated`, as
gunicorn does), and handed on with its real length, so that the view sees it whole or refuses it
with 413. A server that cannot mark the end gets 411, never an empty body.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from services.exceptions import LengthRequired

# The largest request body read (CONTRACT 4); the strict reader refuses a longer one with 413.
MAX_BODY_BYTES = 64 * 1024


class RequestBodyMiddleware:
    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            if not environ.get("wsgi.input_terminated"):
                return self._length_required(start_response)
            body = environ["wsgi.input"].read(MAX_BODY_BYTES + 1)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)

    @staticmethod
    def _length_required(start_response: Callable[..., Any]) -> list[bytes]:
        # Before Django: the problem document is written here, from the one definition.
        status = HTTPStatus(LengthRequired.status_code)
        body = json.dumps(
            {
                "type": "about:blank",
                "title": status.phrase,
                "status": status.value,
                "detail": LengthRequired.default_detail,
                "code": LengthRequired.default_code,
            }
        ).encode()
        start_response(
            f"{status.value} {status.phrase}",
            [
                ("Content-Type", "application/problem+json"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [body]
