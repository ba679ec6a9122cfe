"""The base of every API view: authentication, per-token rate limit, JSON only, 405 before
authentication, and the audit of every refused or failed request whose actor is known.

A successful request is audited by the business function it calls, where the operation
happens (`services.audit.record`, inside the transaction of a change). A request that ends
in an error response (an exception: refused with a 4xx, failed with a 5xx) is audited here,
once its status is known, with the action of the view's `operations` entry for its method and
the service or agent it was about (`request.context`: from the path, noted before
authentication, or from the body, noted by the view).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, cast

from django.http import HttpResponse
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from services import audit
from services.api.context import ApiRequest, RequestContext
from services.api.throttling import TokenRateThrottle
from services.audit import Operation
from services.exceptions import InvalidIdentifier
from services.identifiers import agent_name, service_identifier
from services.models import APPROVAL_ID_PREFIX

# An approval's id as `new_approval_id` makes it: only such a text is noted as a refusal's target.
APPROVAL_ID = re.compile(re.escape(APPROVAL_ID_PREFIX) + r"[A-Za-z0-9_-]{22}")


class JSONOnlyNegotiation(BaseContentNegotiation):
    """Always JSON, whatever the Accept header says: no 406, no browsable API."""

    def select_parser(self, request, parsers):
        return None

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type


def _approval_id(text: str) -> str:
    if not APPROVAL_ID.fullmatch(text):
        raise InvalidIdentifier()
    return text


def note_subject(context: RequestContext, path: dict[str, str]) -> None:
    """What the path names (a service, an agent), for the audit event of a refusal, even one
    that comes before the view runs (a revoked token). A name that cannot be normalized is
    refused by the business function and recorded without it."""
    for parameter, attribute, normalized in (
        ("service", "service", service_identifier),
        ("name", "target", agent_name),
        ("approval_id", "target", _approval_id),
    ):
        if parameter in path:
            with contextlib.suppress(InvalidIdentifier):
                setattr(context, attribute, normalized(path[parameter]))


class AuditedAPIView(APIView):
    """Base of the account and agent APIs. `operations` names what each method does."""

    throttle_classes = [TokenRateThrottle]
    content_negotiation_class = JSONOnlyNegotiation
    operations: dict[str, Operation] = {}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        method = request.method or ""
        if method.lower() not in self.http_method_names:
            raise MethodNotAllowed(method)
        note_subject(cast(ApiRequest, request).context, kwargs)
        super().initial(request, *args, **kwargs)

    # DRF returns what EXCEPTION_HANDLER gives (ours: an HttpResponse); the stubs say Response.
    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]
        response = super().handle_exception(exc)
        if not audit.is_recorded(exc):
            self._audit_refusal(cast(ApiRequest, self.request), response.status_code)
        return response

    def _audit_refusal(self, request: ApiRequest, status: int) -> None:
        context = request.context
        method = "get" if request.method == "HEAD" else (request.method or "").lower()
        operation = self.operations.get(method)
        if context.principal is None or operation is None:
            return  # no account to tell, or a method the view does not allow
        audit.record_refusal(
            context.actor,
            operation,
            status=status,
            service=context.service,
            target=context.target,
            method=context.method,
            path=context.path,
        )


class AccountAPIView(AuditedAPIView):
    """The account API: account tokens only (an agent token is insufficient scope)."""
