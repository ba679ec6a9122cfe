"""Every error as RFC 9457 problem details, on every path.

`exception_handler` serves the REST framework views; `bad_request`, `permission_denied`,
`page_not_found` and `server_error` are Django's handlers for everything else. The body is
`{"type": "about:blank", "title", "status", "detail", "code"}`, plus `errors` for body problems.
No detail holds a value, a token or an exception's text; unexpected exceptions are logged by
class and traceback only (see `services/logs.py`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from rest_framework import exceptions as drf

from services.exceptions import (
    Forbidden,
    InternalError,
    MalformedJSON,
    MissingToken,
    PathNotFound,
    ProblemError,
    RateLimited,
    ServiceUnavailable,
    TokenRefused,
    UnsupportedMediaType,
    UnsupportedMethod,
    problem_document,
)
from services.pages import account_views
from services.pages.paths import is_page_path

PROBLEM_JSON = "application/problem+json"
logger = logging.getLogger("credvault.errors")


class ProblemResponse(HttpResponse):
    """A problem document: its code is named on credvault's own answers to a brokered call."""

    problem_code: str


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> HttpResponse:
    response = ProblemResponse(
        problem_document(status, code, detail, errors=errors, extra=extra),
        status=status,
        content_type=PROBLEM_JSON,
    )
    for name, value in (headers or {}).items():
        response[name] = value
    # Named on credvault's own answers to a brokered call (services/api/middleware.py).
    response.problem_code = code
    return response


def render(problem: ProblemError) -> HttpResponse:
    """The problem details of a problem of `services.exceptions`."""
    return problem_response(
        problem.status_code,
        problem.default_code,
        str(problem.detail),
        errors=problem.errors,
        headers=problem.headers,
        extra=problem.extra,
    )


def database_unavailable() -> HttpResponse:
    return render(ServiceUnavailable())


def internal_error() -> HttpResponse:
    return render(InternalError())


# The REST framework's own exceptions, each as the problem it means here.
_DRF_PROBLEMS: list[tuple[type[drf.APIException], Callable[[], ProblemError]]] = [
    (drf.NotAuthenticated, MissingToken),
    (drf.AuthenticationFailed, TokenRefused),
    (drf.MethodNotAllowed, UnsupportedMethod),
    (drf.NotFound, PathNotFound),
    (drf.PermissionDenied, lambda: Forbidden("The token does not allow this operation.")),
    (drf.UnsupportedMediaType, lambda: UnsupportedMediaType("The media type is not supported.")),
    (drf.ParseError, MalformedJSON),
]


def _from_drf(exc: drf.APIException) -> HttpResponse:
    if isinstance(exc, ProblemError):
        return render(exc)
    if isinstance(exc, drf.Throttled):
        # DRF sets `wait` in Throttled's __init__; the stubs do not declare it.
        wait = exc.wait  # type: ignore[attr-defined]
        return render(RateLimited(max(1, math.ceil(wait or 1))))
    for drf_class, problem in _DRF_PROBLEMS:
        if isinstance(exc, drf_class):
            return render(problem())
    other = ProblemError()
    other.status_code = exc.status_code
    return render(other)


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
    return render(ProblemError())


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(Forbidden())


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: only the admin's forms and the people's pages use CSRF (the API has
    no cookie auth); a page's form is answered with a page."""
    if is_page_path(request.path_info):
        return account_views.csrf_refused(request)
    return render(Forbidden("The form's CSRF check failed; reload the page."))


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(PathNotFound())


def server_error(request: HttpRequest) -> HttpResponse:
    return internal_error()


def safe_methods_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Allow GET and HEAD on a plain Django view; anything else is a 405 problem."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            response = render(UnsupportedMethod())
            response["Allow"] = "GET, HEAD"
            return response
        return view(request, *args, **kwargs)

    return wrapper
