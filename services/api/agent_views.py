"""Agents (account API), the agent credential read (agent API) and the audit listing
(CONTRACT 10). Thin views: read input, call one function, render."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from services import agents, audit, connections
from services.api.authentication import AgentTokenAuthentication
from services.api.base import (
    AuditedAPIView,
    audit_context,
    mark_audited,
    note_service,
    note_target,
)
from services.api.parsing import parse_grants, parse_token_request, read_json_body
from services.api.schema import (
    AGENT_EXAMPLES,
    COMMON_HEADERS,
    TOKEN_EXAMPLES,
    path_identifier,
    problems,
)
from services.api.serializers import (
    AgentCredentialsSerializer,
    AgentInputSerializer,
    AgentSerializer,
    AgentTokenRequestSerializer,
    AgentTokenSerializer,
    AuditPageSerializer,
)
from services.api.views import AccountAPIView
from services.exceptions import InvalidRequest, field_error
from services.identifiers import SERVICE_RULE, InvalidIdentifier, normalize_service
from services.models import AuditAction, AuditEvent
from services.times import rfc3339

NAME_PARAMETER = path_identifier("name", "The agent's name.")


def agent_name(raw: str) -> str:
    try:
        return normalize_service(raw)
    except InvalidIdentifier:
        raise InvalidRequest(
            "The agent name is not valid.", errors=[field_error("name", "invalid", SERVICE_RULE)]
        ) from None


def agent_body(view: agents.AgentView) -> dict:
    return {"name": view.name, "createdAt": rfc3339(view.created_at), "services": view.services}


class AgentListView(AccountAPIView):
    http_method_names = ["get", "head"]
    audit_actions = {"get": AuditAction.AGENTS_LIST}

    @extend_schema(
        operation_id="list_agents",
        summary="List agents",
        responses={200: AgentSerializer(many=True), **problems(401, 403, 405, 429, 503)},
        parameters=COMMON_HEADERS,
    )
    def get(self, request: Request) -> Response:
        return Response([agent_body(view) for view in agents.list_agents(account=request.user)])


class AgentView(AccountAPIView):
    http_method_names = ["put", "delete"]
    audit_actions = {"put": AuditAction.AGENTS_PUT, "delete": AuditAction.AGENTS_DELETE}

    @extend_schema(
        operation_id="put_agent",
        summary="Create an agent or replace its grants",
        description="Grants are service identifiers; a service need not be connected yet. "
        "Removing a grant ends the agent's access to that service at once.",
        request=AgentInputSerializer,
        examples=AGENT_EXAMPLES,
        responses={
            200: OpenApiResponse(AgentSerializer, description="Grants replaced."),
            201: OpenApiResponse(AgentSerializer, description="Agent created."),
            **problems(400, 401, 403, 405, 413, 415, 429, 503),
        },
        parameters=[NAME_PARAMETER, *COMMON_HEADERS],
    )
    def put(self, request: Request, name: str) -> Response:
        normalized = agent_name(name)
        note_target(request, normalized)
        services = parse_grants(read_json_body(request))
        view, created = agents.put_agent(
            account=request.user,
            name=normalized,
            services=services,
            context=audit_context(request),
        )
        mark_audited(request)
        return Response(agent_body(view), status=201 if created else 200)

    @extend_schema(
        operation_id="delete_agent",
        summary="Delete an agent",
        description="Its grants go with it and its tokens are refused from the next request.",
        responses={204: None, **problems(400, 401, 403, 404, 405, 429, 503)},
        parameters=[NAME_PARAMETER, *COMMON_HEADERS],
    )
    def delete(self, request: Request, name: str) -> Response:
        normalized = agent_name(name)
        note_target(request, normalized)
        agents.delete_agent(account=request.user, name=normalized, context=audit_context(request))
        mark_audited(request)
        return Response(status=204)


class AgentTokenView(AccountAPIView):
    http_method_names = ["post"]
    audit_actions = {"post": AuditAction.AGENT_TOKENS_ISSUE}

    @extend_schema(
        operation_id="issue_agent_token",
        summary="Issue an agent token",
        description="The only response that ever holds a token: keep it, it is not shown again.",
        request=AgentTokenRequestSerializer,
        examples=TOKEN_EXAMPLES,
        responses={
            201: AgentTokenSerializer,
            **problems(400, 401, 403, 404, 405, 413, 415, 429, 503),
        },
        parameters=[NAME_PARAMETER, *COMMON_HEADERS],
    )
    def post(self, request: Request, name: str) -> Response:
        normalized = agent_name(name)
        note_target(request, normalized)
        days = parse_token_request(request)
        issued = agents.issue_agent_token(
            account=request.user,
            name=normalized,
            expires_in=timedelta(days=days) if days else None,
            context=audit_context(request),
        )
        mark_audited(request)
        expires_at = issued.token.expires_at
        return Response(
            {
                "token": issued.plaintext,
                "prefix": issued.token.prefix,
                "expiresAt": rfc3339(expires_at) if expires_at else None,
            },
            status=201,
        )


class AuditEventListView(AccountAPIView):
    http_method_names = ["get", "head"]
    audit_actions = {"get": AuditAction.AUDIT_LIST}
    DEFAULT_LIMIT, MAX_LIMIT = 50, 200

    def _int_param(self, request: Request, name: str, default: int | None, high: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        if not raw.isdigit() or not 1 <= int(raw) <= high:
            raise InvalidRequest(
                f"{name} must be a whole number from 1 to {high}.",
                errors=[field_error(name, "invalid", f"A whole number from 1 to {high}.")],
            )
        return int(raw)

    @extend_schema(
        operation_id="list_audit_events",
        summary="List audit events, newest first",
        parameters=[
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                OpenApiParameter.QUERY,
                description="Events per page, 1 to 200.",
            ),
            OpenApiParameter(
                "before",
                str,
                OpenApiParameter.QUERY,
                description="The `next` cursor of the previous page.",
                pattern=r"^[1-9][0-9]{0,17}$",
            ),
            *COMMON_HEADERS,
        ],
        responses={200: AuditPageSerializer, **problems(400, 401, 403, 405, 429, 503)},
    )
    def get(self, request: Request) -> Response:
        limit = self._int_param(request, "limit", self.DEFAULT_LIMIT, self.MAX_LIMIT)
        before = self._int_param(request, "before", None, 2**62)
        events, cursor = audit.page(account=request.user, limit=limit, before=before)
        return Response(
            {
                "events": [event_body(event) for event in events],
                "next": str(cursor) if cursor is not None else None,
            }
        )


def event_body(event: AuditEvent) -> dict:
    return {
        "seq": event.seq,
        "time": rfc3339(event.occurred_at),
        "tokenPrefix": event.token_prefix,
        "agent": event.agent_name or None,
        "action": event.action,
        "service": event.service or None,
        "target": event.target or None,
        "outcome": event.outcome,
        "status": event.status,
        "requestId": event.request_id,
    }


class AgentCredentialsView(AuditedAPIView):
    """The agent API: agent tokens only (an account token is insufficient scope)."""

    authentication_classes = [AgentTokenAuthentication]
    http_method_names = ["get", "head"]
    audit_actions = {"get": AuditAction.AGENT_READ}

    @extend_schema(
        operation_id="agent_read_credentials",
        summary="Read a granted service's credentials (agent token)",
        description="One complete stored set, read in one transaction. 403 not_granted without "
        "a grant; 404 service_not_connected with a grant but nothing stored.",
        responses={
            200: AgentCredentialsSerializer,
            **problems(400, 401, 403, 404, 405, 429, 500, 503),
        },
        parameters=[path_identifier("service", "A granted service."), *COMMON_HEADERS],
    )
    def get(self, request: Request, service: str) -> Response:
        normalized = connections.service_identifier(service)
        note_service(request, normalized)
        read = agents.read_credentials(
            token=request.auth, service=normalized, context=audit_context(request)
        )
        mark_audited(request)
        return Response(
            {
                "service": read.service,
                "keyType": read.key_type,
                "connectedAt": rfc3339(read.connected_at),
                "credentials": [
                    {"keyName": key_name, "value": value.reveal()}
                    for key_name, value in read.fields
                ],
            }
        )
