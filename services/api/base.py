"""The base of every API view: authentication, per-token rate limit, JSON only, 405 before
authentication, and the audit of every request whose actor is known.

Business functions that change something record their own event inside their transaction
and the view marks the request as audited. Any other request with a known actor (reads,
refusals, errors) is recorded here once the response is known: success below 400, refused for
4xx, error for 5xx. A successful read that cannot be audited is not answered (503).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from services import audit
from services.api.errors import database_unavailable
from services.api.throttling import TokenRateThrottle
from services.models import AuditOutcome

logger = logging.getLogger("credvault.audit")


class JSONOnlyNegotiation(BaseContentNegotiation):
    """Always JSON, whatever the Accept header says: no 406, no browsable API."""

    def select_parser(self, request, parsers):
        return None

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type


def note_service(request: Request, service: str) -> None:
    """The normalized service a request is about, for its audit event."""
    request._request.credvault_service = service


def note_target(request: Request, target: str) -> None:
    """The agent an agent operation acts on, for its audit event."""
    request._request.credvault_target = target


def mark_audited(request: Request) -> None:
    """The business function recorded this request's event in its own transaction."""
    request._request.credvault_audited = True


def audit_context(request: Request) -> audit.AuditContext:
    return request._request.credvault_audit


def _outcome(status: int) -> str:
    if status < 400:
        return AuditOutcome.SUCCESS
    return AuditOutcome.REFUSED if status < 500 else AuditOutcome.ERROR


class AuditedAPIView(APIView):
    """Base of the account and agent APIs. `audit_actions` maps a method to its action."""

    throttle_classes = [TokenRateThrottle]
    content_negotiation_class = JSONOnlyNegotiation
    audit_actions: dict[str, str] = {}

    def initial(self, request: Request, *args, **kwargs) -> None:
        if request.method.lower() not in self.http_method_names:
            raise MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)

    def finalize_response(
        self,
        request: Request,
        response: HttpResponse,
        *args,
        **kwargs,
    ) -> HttpResponse:
        response = self._audit(request._request, response)
        return super().finalize_response(request, response, *args, **kwargs)

    def _audit(self, django_request: HttpRequest, response: HttpResponse) -> HttpResponse:
        context = getattr(django_request, "credvault_audit", None)
        method = "get" if django_request.method == "HEAD" else django_request.method.lower()
        action = self.audit_actions.get(method)
        if context is None or action is None or getattr(django_request, "credvault_audited", False):
            return response
        outcome = _outcome(response.status_code)
        try:
            audit.record(
                context,
                action=action,
                outcome=outcome,
                status=response.status_code,
                service=getattr(django_request, "credvault_service", ""),
                target=getattr(django_request, "credvault_target", ""),
            )
        except DatabaseError as exc:
            logger.error("audit event not written: %s", type(exc).__name__)
            if outcome == AuditOutcome.SUCCESS:
                return database_unavailable()
        return response
