"""Request context for every response: a request id, `Cache-Control: no-store`, 503 problem
details when the database cannot be reached, and one access-log line per request.

The access-log line holds the method, the path (escaped), the status, the duration, the display
prefix of an accepted token and the request id: never a body, a query string or a header.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from urllib.parse import quote

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

from services.api.errors import database_unavailable

access_log = logging.getLogger("credvault.access")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def request_id_for(request: HttpRequest) -> str:
    """The caller's X-Request-ID when it is a plain token, else a new one."""
    given = request.META.get("HTTP_X_REQUEST_ID", "")
    return given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def request_id_of(request: HttpRequest) -> str:
    """The id the middleware gave the request (a new one outside it, as in unit tests)."""
    django_request = getattr(request, "_request", request)
    if not hasattr(django_request, "credvault_request_id"):
        django_request.credvault_request_id = request_id_for(django_request)
    return django_request.credvault_request_id


class RequestContextMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request.credvault_request_id = request_id_for(request)
        response = self.get_response(request)
        response["Cache-Control"] = "no-store"
        response["X-Request-ID"] = request.credvault_request_id
        access_log.info(
            "%s %s %s %.1fms token=%s request_id=%s",
            request.method,
            quote(request.path, safe=_PATH_SAFE),
            response.status_code,
            (time.perf_counter() - started) * 1000,
            getattr(request, "credvault_token_prefix", "-"),
            request.credvault_request_id,
        )
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError)):
            access_log.warning("database unavailable: %s", type(exception).__name__)
            return database_unavailable()
        return None
