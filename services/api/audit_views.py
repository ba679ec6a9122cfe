"""The audit listing: the account's events, newest first, with a cursor."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from services import audit
from services.api.base import AccountAPIView
from services.api.context import ApiRequest
from services.api.rendering import render
from services.api.serializers import AuditPageSerializer
from services.audit import Operation
from services.exceptions import FieldErrorCode, InvalidRequest, field_error

DEFAULT_LIMIT, MAX_LIMIT = 50, 200
# A cursor is a seq: a positive whole number in ASCII digits, at most 19 of them. One above
# every seq (they stay below 2**62) reads from the newest event, as no cursor does.
CURSOR = re.compile(r"[1-9][0-9]{0,18}")
HIGHEST_CURSOR = 2**62


def _refuse(name: str, rule: str) -> InvalidRequest:
    return InvalidRequest(
        f"{name} must be {rule}.", errors=[field_error(name, FieldErrorCode.INVALID, rule)]
    )


def page_limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= MAX_LIMIT):
        raise _refuse("limit", f"a whole number from 1 to {MAX_LIMIT}")
    return int(raw)


def page_cursor(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not CURSOR.fullmatch(raw):
        raise _refuse("before", "the `next` cursor of a page: a positive whole number")
    return min(int(raw), HIGHEST_CURSOR)


class AuditEventListView(AccountAPIView):
    http_method_names = ["get", "head"]
    operations = {"get": Operation.LIST_AUDIT_EVENTS}

    @extend_schema(
        operation_id="list_audit_events",
        summary="List audit events, newest first",
        tags=["audit"],
        parameters=[
            OpenApiParameter(
                "limit",
                {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                },
                OpenApiParameter.QUERY,
                description=f"Events per page, 1 to {MAX_LIMIT}.",
            ),
            OpenApiParameter(
                "before",
                {"type": "string", "pattern": f"^{CURSOR.pattern}$"},
                OpenApiParameter.QUERY,
                description="The `next` cursor of the previous page.",
            ),
        ],
        responses={200: AuditPageSerializer},
    )
    def get(self, request: ApiRequest) -> Response:
        limit = page_limit(request.query_params.get("limit"))
        before = page_cursor(request.query_params.get("before"))
        page = audit.page(actor=request.context.actor, limit=limit, before=before)
        return Response(render(AuditPageSerializer, page))
