"""Agents (account API) and the agent credential read (agent API). Thin views:
read input, call one function, render."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from services import agents
from services.api.authentication import AgentTokenAuthentication
from services.api.base import AccountAPIView, AuditedAPIView
from services.api.context import ApiRequest
from services.api.parsing import parse_grants, read_json_body, read_shape
from services.api.rendering import render, render_many
from services.api.schema import AGENT_EXAMPLES, TOKEN_EXAMPLES, path_identifier
from services.api.serializers import (
    AgentCredentialsSerializer,
    AgentInputSerializer,
    AgentSerializer,
    AgentTokenInfoSerializer,
    AgentTokenInputSerializer,
    AgentTokenSerializer,
)
from services.audit import Operation

NAME_PARAMETER = path_identifier(
    "name", "The agent's name; one holding `/` cannot be addressed (404 not_found).", "report-bot"
)


class AgentListView(AccountAPIView):
    http_method_names = ["get", "head"]
    operations = {"get": Operation.LIST_AGENTS}

    @extend_schema(
        operation_id="list_agents",
        summary="List agents",
        tags=["agents"],
        responses={200: AgentSerializer(many=True)},
    )
    def get(self, request: ApiRequest) -> Response:
        views = agents.list_agents(actor=request.context.actor)
        return Response(render_many(AgentSerializer, views))


class AgentView(AccountAPIView):
    http_method_names = ["put", "delete"]
    operations = {"put": Operation.CREATE_AGENT, "delete": Operation.DELETE_AGENT}

    @extend_schema(
        operation_id="put_agent",
        summary="Create an agent or replace its grants",
        tags=["agents"],
        description="Each grant is a service identifier (brokered access, every method, every "
        "path, every base) or an object with `access`, `methods`, `paths`, `base` and "
        "`graphql` (the sensitive GraphQL mutations it allows by name); a service need not be "
        "connected yet. Removing a grant ends the agent's access to that service at once.",
        request=AgentInputSerializer,
        examples=AGENT_EXAMPLES,
        responses={
            200: OpenApiResponse(AgentSerializer, description="Grants replaced."),
            201: OpenApiResponse(AgentSerializer, description="Agent created."),
        },
        parameters=[NAME_PARAMETER],
    )
    def put(self, request: ApiRequest, name: str) -> Response:
        services = parse_grants(read_json_body(request))
        put = agents.put_agent(actor=request.context.actor, name=name, services=services)
        return Response(render(AgentSerializer, put.agent), status=put.event.status)

    @extend_schema(
        operation_id="delete_agent",
        summary="Delete an agent",
        tags=["agents"],
        description="Its grants go with it and its tokens are refused from the next request.",
        responses={204: OpenApiResponse(description="Deleted.")},
        parameters=[NAME_PARAMETER],
    )
    def delete(self, request: ApiRequest, name: str) -> Response:
        event = agents.delete_agent(actor=request.context.actor, name=name)
        return Response(status=event.status)


class AgentTokenView(AccountAPIView):
    http_method_names = ["get", "head", "post"]
    operations = {"get": Operation.LIST_AGENT_TOKENS, "post": Operation.ISSUE_AGENT_TOKEN}

    @extend_schema(
        operation_id="list_agent_tokens",
        summary="List an agent's tokens",
        tags=["agent-tokens"],
        description="Prefixes and dates only: never a token or its digest.",
        responses={200: AgentTokenInfoSerializer(many=True)},
        parameters=[NAME_PARAMETER],
    )
    def get(self, request: ApiRequest, name: str) -> Response:
        listed = agents.list_agent_tokens(actor=request.context.actor, name=name)
        return Response(render_many(AgentTokenInfoSerializer, listed))

    @extend_schema(
        operation_id="issue_agent_token",
        summary="Issue an agent token",
        tags=["agent-tokens"],
        description="The only response that ever holds a token: keep it, it is not shown again.",
        request=AgentTokenInputSerializer,
        examples=TOKEN_EXAMPLES,
        responses={
            201: AgentTokenSerializer,
        },
        parameters=[NAME_PARAMETER],
    )
    def post(self, request: ApiRequest, name: str) -> Response:
        days = read_shape(request, AgentTokenInputSerializer, optional=True).get("expiresInDays")
        result = agents.issue_agent_token(
            actor=request.context.actor,
            name=name,
            expires_in=timedelta(days=days) if days else None,
        )
        return Response(render(AgentTokenSerializer, result.issued), status=result.event.status)


class AgentTokenRevokeView(AccountAPIView):
    http_method_names = ["delete"]
    operations = {"delete": Operation.REVOKE_AGENT_TOKEN}

    @extend_schema(
        operation_id="revoke_agent_token",
        summary="Revoke an agent's token",
        tags=["agent-tokens"],
        description="The token is refused from its next request. Revoking a revoked token "
        "changes nothing. Unknown prefix: 404 token_not_found.",
        responses={204: OpenApiResponse(description="Revoked.")},
        parameters=[
            NAME_PARAMETER,
            OpenApiParameter(
                "prefix", str, OpenApiParameter.PATH, description="The token's display prefix."
            ),
        ],
    )
    def delete(self, request: ApiRequest, name: str, prefix: str) -> Response:
        event = agents.revoke_agent_token(actor=request.context.actor, name=name, prefix=prefix)
        return Response(status=event.status)


class AgentCredentialsView(AuditedAPIView):
    """The agent API: agent tokens only (an account token is insufficient scope)."""

    authentication_classes = [AgentTokenAuthentication]
    http_method_names = ["get", "head"]
    operations = {"get": Operation.READ_CREDENTIALS}
    problems = (409,)

    @extend_schema(
        operation_id="agent_read_credentials",
        summary="Read a granted service's credentials (agent token)",
        tags=["agent"],
        description="One complete stored set, read in one statement: never a mix of two "
        "stores. 403 not_granted without a grant, read_not_granted with a grant for brokered "
        "calls only (access proxy); 404 service_not_connected with a grant but nothing stored.",
        responses={200: AgentCredentialsSerializer},
        parameters=[path_identifier("service", "A granted service.", "github")],
    )
    def get(self, request: ApiRequest, service: str) -> Response:
        read = agents.read_credentials(actor=request.context.actor, service=service)
        return Response(render(AgentCredentialsSerializer, read))
