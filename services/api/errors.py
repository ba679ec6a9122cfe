"""Every error as RFC 9457 problem details (CONTRACT 7), on every path.

`exception_handler` serves the REST framework views; `bad_request`, `permission_denied`,
`page_not_found` and `server_error` are Django's handlers for everything else. The body is
`{"type": "about:blank", "title", "status", "detail", "code"}`, plus `errors` for body problems.
No detail holds a value, a token or an exception's text; unexpected exceptions are logged by
class and traceback only (see `services/logs.py`).
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from rest_framework import exceptions as drf

from services.exceptions import REALM, ProblemError, ServiceUnavailable

PROBLEM_JSON = "application/problem+json"
logger = logging.getLogger("credvault.errors")


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> HttpResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    body.update(extra or {})
    response = HttpResponse(
        json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        status=status,
        content_type=PROBLEM_JSON,
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def database_unavailable() -> HttpResponse:
    exc = ServiceUnavailable()
    return problem_response(exc.status_code, exc.default_code, str(exc.detail))


def internal_error() -> HttpResponse:
    return problem_response(500, "internal_error", "An internal error occurred.")


def _from_drf(exc: drf.APIException) -> HttpResponse:
    if isinstance(exc, ProblemError):
        return problem_response(
            exc.status_code,
            exc.default_code,
            str(exc.detail),
            errors=exc.errors,
            headers=exc.headers,
            extra=exc.extra,
        )
    if isinstance(exc, drf.NotAuthenticated):
        return problem_response(
            401,
            "not_authenticated",
            "Send an account API token: Authorization: Bearer <token>.",
            headers={"WWW-Authenticate": REALM},
        )
    if isinstance(exc, drf.AuthenticationFailed):
        return problem_response(
            401,
            "invalid_token",
            "The token is malformed, unknown, revoked or expired.",
            headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
        )
    if isinstance(exc, drf.MethodNotAllowed):
        return problem_response(405, "method_not_allowed", "This path does not allow the method.")
    if isinstance(exc, drf.Throttled):
        wait = max(1, math.ceil(exc.wait or 1))
        return problem_response(
            429,
            "rate_limited",
            f"Too many requests with this token. Retry after {wait} seconds.",
            headers={"Retry-After": str(wait)},
        )
    if isinstance(exc, drf.NotFound):
        return problem_response(404, "not_found", "There is nothing at this path.")
    if isinstance(exc, drf.PermissionDenied):
        return problem_response(403, "forbidden", "The token does not allow this operation.")
    if isinstance(exc, drf.UnsupportedMediaType):
        return problem_response(415, "unsupported_media_type", "The media type is not supported.")
    if isinstance(exc, drf.ParseError):
        return problem_response(400, "malformed_json", "The body is not strict JSON.")
    return problem_response(exc.status_code, "invalid_request", "The request is invalid.")


def log_unexpected(exc: BaseException, where: str) -> None:
    # The formatter prints the traceback without the exception's message.
    logger.error("unexpected %s in %s", type(exc).__name__, where, exc_info=exc)


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse:
    """The REST framework's exception handler: every exception becomes problem details."""
    if isinstance(exc, drf.APIException):
        return _from_drf(exc)
    if isinstance(exc, Http404):
        return _from_drf(drf.NotFound())
    if isinstance(exc, PermissionDenied):
        return _from_drf(drf.PermissionDenied())
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable: %s", type(exc).__name__)
        return database_unavailable()
    view = context.get("view")
    log_unexpected(exc, type(view).__name__ if view else "a view")
    return internal_error()


# --- Django's handlers, for paths outside the REST framework ----------------------------------


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return problem_response(400, "invalid_request", "The request is invalid.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return problem_response(403, "forbidden", "The request is not allowed.")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: only the admin's forms use CSRF; the API has no cookie auth."""
    return problem_response(403, "forbidden", "The form's CSRF check failed; reload the page.")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return problem_response(404, "not_found", "There is nothing at this path.")


def server_error(request: HttpRequest) -> HttpResponse:
    return internal_error()


def safe_methods_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Allow GET and HEAD on a plain Django view; anything else is a 405 problem."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return problem_response(
                405,
                "method_not_allowed",
                "This path does not allow the method.",
                headers={"Allow": "GET, HEAD"},
            )
        return view(request, *args, **kwargs)

    return wrapper
