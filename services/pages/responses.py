"""How every people's page answers: rendered with its request (the CSRF token, the
signed-in user), never cached, loading nothing, framed nowhere, and sending a Referer to
credvault only (a sign-in link's path holds its secret). Not `no-referrer`: under it a
browser sends `Origin: null` with a form's POST, which Django's CSRF check refuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme

# No script, no frame, nothing loaded; the one style inline; forms post to credvault only.
PAGE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def _guarded(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    response["Content-Security-Policy"] = PAGE_POLICY
    response["Referrer-Policy"] = "same-origin"
    return response


def page(
    request: HttpRequest,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HttpResponse:
    response = HttpResponse(
        render_to_string(template, dict(context or {}), request=request), status=status
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return _guarded(response)


def redirect(location: str) -> HttpResponse:
    """A 303: after a form's POST, the browser GETs `location`."""
    response = HttpResponseRedirect(location, status=303)
    return _guarded(response)


def local_path(given: str) -> str:
    """`given` when it is a path of this site (`/approvals/apv_...`), else "": a `?next=` may
    never send the browser elsewhere."""
    if not given.startswith("/") or given.startswith(("//", "/\\")):
        return ""
    if any(ord(character) < 32 or character == "\\" for character in given):
        return ""
    if not url_has_allowed_host_and_scheme(given, allowed_hosts=None):
        return ""
    return given


def request_id(request: HttpRequest) -> str:
    """The request's id (services/api/middleware.py gives every request one)."""
    return str(getattr(getattr(request, "context", None), "request_id", ""))


def client_address(request: HttpRequest) -> str:
    """The address the request came from: the last `X-Forwarded-For` entry (the one the
    proxy added) when a TLS-terminating proxy is trusted (SECURE_PROXY_SSL_HEADER), else
    the connection's."""
    if settings.SECURE_PROXY_SSL_HEADER:
        forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return str(request.META.get("REMOTE_ADDR", ""))
