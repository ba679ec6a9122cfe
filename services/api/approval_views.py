"""Consent in the API: the account lists and decides approvals (account token), an agent asks
for access and reads its request (agent token). Thin views: read input, call one function,
render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from services.api.authentication import AgentTokenAuthentication
from services.api.base import AccountAPIView, AuditedAPIView
from services.api.context import ApiRequest
from services.api.parsing import parse_grants, read_json_body, read_shape
from services.api.rendering import render, render_many
from services.api.schema import request_examples
from services.api.serializers import (
    AccessRequestCreatedSerializer,
    AccessRequestInputSerializer,
    AccessRequestSerializer,
    ApprovalSerializer,
    ApproveInputSerializer,
)
from services.audit import Operation
from services.consent import access, deciding, decisions
from services.consent.decisions import Decider
from services.models import ApprovalStatus

ID_PARAMETER = OpenApiParameter(
    "approval_id",
    str,
    OpenApiParameter.PATH,
    description="The approval's or access request's id (`apv_...`).",
)
STATUS_PARAMETER = OpenApiParameter(
    "status",
    {"type": "string", "enum": list(ApprovalStatus.values)},
    OpenApiParameter.QUERY,
    description="Only those of this status; another value is 400.",
)
APPROVE_EXAMPLES = request_examples(
    {
        "A call, once (or an access request, as asked)": {},
        "A call, for 30 minutes": {"allowForMinutes": 30},
        "An access request, narrower, for a day": {
            "services": [{"service": "github", "methods": ["GET"], "paths": ["/repos/acme"]}],
            "validForMinutes": 1440,
        },
    }
)
ACCESS_EXAMPLES = request_examples(
    {
        "Read issues for an hour": {
            "services": [{"service": "github", "methods": ["GET"], "paths": ["/repos/acme"]}],
            "reason": "Summarize this week's issues of acme/app.",
            "validForMinutes": 60,
        }
    }
)


def _decider(request: ApiRequest) -> Decider:
    actor = request.context.actor
    return Decider(
        account_id=actor.account_id,
        request_id=actor.request_id,
        token_prefix=actor.token_prefix,
    )


class ApprovalListView(AccountAPIView):
    http_method_names = ["get", "head"]
    operations = {"get": Operation.LIST_APPROVALS}

    @extend_schema(
        operation_id="list_approvals",
        summary="List approvals and access requests, newest first",
        tags=["approvals"],
        description="The newest 200 of the account, of every agent; a pending one past its "
        "expiry is shown (and recorded) expired.",
        parameters=[STATUS_PARAMETER],
        responses={200: ApprovalSerializer(many=True)},
    )
    def get(self, request: ApiRequest) -> Response:
        approvals = deciding.list_approvals(
            actor=request.context.actor, status=request.query_params.get("status")
        )
        return Response(render_many(ApprovalSerializer, approvals))


# What both decisions' operations say of a decision.
DECISION_IS_FINAL = (
    "A decision is final: a second one, or one on an expired approval, is 409 approval_decided. "
    "Unknown id, or another account's: 404 approval_not_found."
)


class ApproveView(AccountAPIView):
    http_method_names = ["post"]
    operations = {"post": Operation.APPROVE}
    problems = (409,)

    @extend_schema(
        operation_id="approve",
        summary="Approve a call or an access request",
        tags=["approvals"],
        description=DECISION_IS_FINAL,
        request=ApproveInputSerializer,
        examples=APPROVE_EXAMPLES,
        responses={200: ApprovalSerializer},
        parameters=[ID_PARAMETER],
    )
    def post(self, request: ApiRequest, approval_id: str) -> Response:
        options = read_shape(request, ApproveInputSerializer, optional=True)
        approval = deciding.approve(
            decider=_decider(request),
            approval_id=approval_id,
            allow_for_minutes=options.get("allowForMinutes"),
            services=parse_grants(options, ApproveInputSerializer)
            if "services" in options
            else None,
            valid_for_minutes=options.get("validForMinutes"),
        )
        return Response(render(ApprovalSerializer, approval))


class DenyView(AccountAPIView):
    http_method_names = ["post"]
    operations = {"post": Operation.DENY}
    problems = (409,)

    @extend_schema(
        operation_id="deny",
        summary="Deny a call or an access request",
        tags=["approvals"],
        description=DECISION_IS_FINAL,
        request=None,
        responses={200: ApprovalSerializer},
        parameters=[ID_PARAMETER],
    )
    def post(self, request: ApiRequest, approval_id: str) -> Response:
        approval = decisions.deny(decider=_decider(request), approval_id=approval_id)
        return Response(render(ApprovalSerializer, approval))


class AccessRequestListView(AuditedAPIView):
    """The agent API: agent tokens only."""

    authentication_classes = [AgentTokenAuthentication]
    http_method_names = ["post"]
    operations = {"post": Operation.REQUEST_ACCESS}

    @extend_schema(
        operation_id="agent_request_access",
        summary="Ask a person for more access (agent token)",
        tags=["agent"],
        description="A member of the account decides at `approvalUrl` (or the account API "
        "does), as asked or narrower; the agent reads the outcome at GET "
        "/api/v1/agent/access-requests/{id}. At most 5 requests and call approvals of one "
        "agent pending at once (429 too_many_pending).",
        request=AccessRequestInputSerializer,
        examples=ACCESS_EXAMPLES,
        responses={201: AccessRequestCreatedSerializer},
    )
    def post(self, request: ApiRequest) -> Response:
        body = read_json_body(request)
        services = parse_grants(body, AccessRequestInputSerializer)
        approval = access.request_access(
            actor=request.context.actor,
            services=services,
            reason=body["reason"],
            valid_for_minutes=body.get("validForMinutes"),
        )
        return Response(render(AccessRequestCreatedSerializer, approval), status=201)


class AccessRequestView(AuditedAPIView):
    """The agent API: agent tokens only."""

    authentication_classes = [AgentTokenAuthentication]
    http_method_names = ["get", "head"]
    operations = {"get": Operation.READ_ACCESS_REQUEST}

    @extend_schema(
        operation_id="agent_read_access_request",
        summary="Read an access request of this agent (agent token)",
        tags=["agent"],
        description="Its status (pending, approved, denied, expired) and, approved, what was "
        "granted. Another agent's request, or an unknown id: 404 approval_not_found.",
        responses={200: OpenApiResponse(AccessRequestSerializer)},
        parameters=[ID_PARAMETER],
    )
    def get(self, request: ApiRequest, approval_id: str) -> Response:
        approval = access.access_request_of(actor=request.context.actor, approval_id=approval_id)
        return Response(render(AccessRequestSerializer, approval))
