"""Request context for every response: a request id, `Cache-Control: no-store`, 503 problem
details when the database cannot be reached, and one access-log line per request.

The access-log line holds the method, the path (escaped), the status, the duration, the display
prefix of an accepted token and the request id: never a body, a query string or a header. A
connect's start page is logged without its id, which lets whoever holds it continue the
connect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from services.api import health
from services.api.context import ContextRequest, RequestContext
from services.api.errors import database_unavailable
from services.api.wsgi import ADMIN_PATH_PREFIX, CREDVAULT_ERROR_HEADER, PROXY_PATH_PREFIX
from services.logs import escaped_path
from services.members import SIGN_IN_PATH
from services.oauth.connect import START_PATH
from services.pages.paths import PAGE_PREFIXES

access_log = logging.getLogger("credvault.access")


# The paths whose last part is a secret: a connect's start id, a sign-in link's secret.
_SECRET_PATHS = (START_PATH, SIGN_IN_PATH)
# Where Django's sessions, users and messages serve: the admin and the people's pages.
SESSION_PREFIXES = (ADMIN_PATH_PREFIX, *PAGE_PREFIXES)


def logged_path(path: str) -> str:
    """The path as the access log shows it: a connect's start id and a sign-in link's secret
    withheld."""
    for secret_path in _SECRET_PATHS:
        if path.startswith(secret_path):
            return secret_path + "..."
    return path


class RequestContextMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: ContextRequest) -> HttpResponse:
        started = time.perf_counter()
        context = request.context = RequestContext.for_request(request)
        response = self.get_response(request)
        if request.method == "HEAD" and not response.streaming:
            # The headers of the GET, with its Content-Length (a provider's own, when the
            # answer is one), and no body (RFC 9110): gunicorn drops a HEAD's body with a
            # warning per request otherwise.
            if not response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
            response.content = b""
        response["Cache-Control"] = "no-store"
        if getattr(response, "passed_on", False):
            # A provider's answer keeps its own X-Request-ID; credvault's goes beside it.
            response["X-Credvault-Request-Id"] = context.request_id
        else:
            response["X-Request-ID"] = context.request_id
            if request.path.startswith(PROXY_PATH_PREFIX):
                # credvault's own answer to a brokered call (a refusal, a timeout): the
                # agent tells it from the provider's by these.
                response["X-Credvault-Request-Id"] = context.request_id
                response[CREDVAULT_ERROR_HEADER] = getattr(response, "problem_code", "error")
        accepted = context.principal if context.authenticated else None
        access_log.info(
            "%s %s %s %.1fms token=%s request_id=%s",
            request.method,
            escaped_path(logged_path(request.path)),
            response.status_code,
            (time.perf_counter() - started) * 1000,
            accepted.token_prefix if accepted else "-",
            context.request_id,
        )
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError)):
            access_log.warning("database unavailable: %s", type(exception).__name__)
            return database_unavailable()
        return None


class HealthProbeMiddleware:
    """`/healthz` and `/readyz`, answered before any middleware reads the Host header: probes
    send the pod's IP, which ALLOWED_HOSTS need not hold. Every other path keeps
    Django's host check."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.probes = {"/healthz": health.healthz, "/readyz": health.readyz}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = self.probes.get(request.path_info)
        return probe(request) if probe is not None else self.get_response(request)


class _AdminOnly:
    """A middleware of Django's that only the admin and the people's pages use (their
    sessions, their user, the admin's messages): any other request passes by it. The API, the
    MCP server and the OAuth pages read no session, user or message; skipping the three saved
    about 4.5% of a brokered call's instructions (docs/performance.md). Each is a subclass of
    Django's own, so that the admin's system checks still find it."""

    # As Django's MiddlewareMixin declares them: the chain may answer later (async).
    get_response: Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if not request.path_info.startswith(SESSION_PREFIXES):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class AdminSessionMiddleware(_AdminOnly, SessionMiddleware):
    pass


class AdminAuthenticationMiddleware(_AdminOnly, AuthenticationMiddleware):
    pass


class AdminMessageMiddleware(_AdminOnly, MessageMiddleware):
    pass
