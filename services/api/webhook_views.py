"""Webhook endpoints of the account API (services/webhooks/endpoints.py holds the rules).
Thin views: read input, call one function, render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from services.api.audit_views import CURSOR, DEFAULT_LIMIT, MAX_LIMIT, page_cursor, page_limit
from services.api.base import AccountAPIView
from services.api.context import ApiRequest
from services.api.parsing import read_shape
from services.api.rendering import render, render_many
from services.api.schema import WEBHOOK_CHANGE_EXAMPLES, WEBHOOK_EXAMPLES
from services.api.serializers import (
    WebhookAttemptPageSerializer,
    WebhookChangeSerializer,
    WebhookCreatedSerializer,
    WebhookInputSerializer,
    WebhookRedeliverySerializer,
    WebhookSecretSerializer,
    WebhookSerializer,
    WebhookTestSerializer,
)
from services.audit import Operation
from services.webhooks import endpoints

WEBHOOK_ID = OpenApiParameter(
    "webhook_id", str, OpenApiParameter.PATH, description="The endpoint's id, `wh_...`."
)
EVENT_ID = OpenApiParameter(
    "event_id", str, OpenApiParameter.PATH, description="The event's id, `evt_...`."
)


class WebhookListView(AccountAPIView):
    http_method_names = ["get", "head", "post"]
    operations = {"post": Operation.CREATE_WEBHOOK}
    problems = (409,)

    @extend_schema(
        operation_id="list_webhooks",
        summary="List the account's webhook endpoints",
        tags=["webhooks"],
        responses={200: WebhookSerializer(many=True)},
    )
    def get(self, request: ApiRequest) -> Response:
        found = endpoints.list_endpoints(actor=request.context.actor)
        return Response(render_many(WebhookSerializer, found))

    @extend_schema(
        operation_id="create_webhook",
        summary="Add a webhook endpoint (at most 10); its secret is shown once",
        tags=["webhooks"],
        request=WebhookInputSerializer,
        examples=WEBHOOK_EXAMPLES,
        responses={201: WebhookCreatedSerializer},
    )
    def post(self, request: ApiRequest) -> Response:
        document = read_shape(request, WebhookInputSerializer)
        created = endpoints.create_endpoint(
            actor=request.context.actor,
            url=document["url"],
            events=document.get("events", []),
            description=document.get("description", ""),
        )
        return Response(render(WebhookCreatedSerializer, created), status=201)


class WebhookView(AccountAPIView):
    http_method_names = ["get", "head", "patch", "delete"]
    operations = {"patch": Operation.UPDATE_WEBHOOK, "delete": Operation.DELETE_WEBHOOK}

    @extend_schema(
        operation_id="get_webhook",
        summary="Show a webhook endpoint",
        tags=["webhooks"],
        parameters=[WEBHOOK_ID],
        responses={200: WebhookSerializer},
    )
    def get(self, request: ApiRequest, webhook_id: str) -> Response:
        found = endpoints.get_endpoint(actor=request.context.actor, endpoint_id=webhook_id)
        return Response(render(WebhookSerializer, found))

    @extend_schema(
        operation_id="update_webhook",
        summary="Change a webhook endpoint; `enabled: true` resumes a disabled one",
        tags=["webhooks"],
        parameters=[WEBHOOK_ID],
        request=WebhookChangeSerializer,
        examples=WEBHOOK_CHANGE_EXAMPLES,
        responses={200: WebhookSerializer},
    )
    def patch(self, request: ApiRequest, webhook_id: str) -> Response:
        document = read_shape(request, WebhookChangeSerializer)
        changed = endpoints.update_endpoint(
            actor=request.context.actor,
            endpoint_id=webhook_id,
            url=document.get("url"),
            events=document.get("events"),
            description=document.get("description"),
            enabled=document.get("enabled"),
        )
        return Response(render(WebhookSerializer, changed))

    @extend_schema(
        operation_id="delete_webhook",
        summary="Delete a webhook endpoint and its deliveries",
        tags=["webhooks"],
        parameters=[WEBHOOK_ID],
        responses={204: OpenApiResponse(description="Deleted.")},
    )
    def delete(self, request: ApiRequest, webhook_id: str) -> Response:
        endpoints.delete_endpoint(actor=request.context.actor, endpoint_id=webhook_id)
        return Response(status=204)


class WebhookRotateView(AccountAPIView):
    http_method_names = ["post"]
    operations = {"post": Operation.ROTATE_WEBHOOK_SECRET}

    @extend_schema(
        operation_id="rotate_webhook_secret",
        summary="Give a webhook endpoint a new secret; the old one signs too for 24 hours",
        tags=["webhooks"],
        parameters=[WEBHOOK_ID],
        request=None,
        responses={201: WebhookSecretSerializer},
    )
    def post(self, request: ApiRequest, webhook_id: str) -> Response:
        rotated = endpoints.rotate_secret(actor=request.context.actor, endpoint_id=webhook_id)
        return Response(render(WebhookSecretSerializer, rotated), status=201)


class WebhookTestView(AccountAPIView):
    http_method_names = ["post"]

    @extend_schema(
        operation_id="send_webhook_test_event",
        summary="Send a `webhook.test` event to a webhook endpoint",
        tags=["webhooks"],
        parameters=[WEBHOOK_ID],
        request=None,
        responses={202: WebhookTestSerializer},
    )
    def post(self, request: ApiRequest, webhook_id: str) -> Response:
        event = endpoints.send_test(actor=request.context.actor, endpoint_id=webhook_id)
        return Response(render(WebhookTestSerializer, event), status=202)


class WebhookDeliveriesView(AccountAPIView):
    http_method_names = ["get", "head"]

    @extend_schema(
        operation_id="list_webhook_deliveries",
        summary="List a webhook endpoint's delivery attempts, newest first",
        tags=["webhooks"],
        parameters=[
            WEBHOOK_ID,
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
                OpenApiParameter.QUERY,
                description=f"Attempts per page, 1 to {MAX_LIMIT}.",
            ),
            OpenApiParameter(
                "before",
                {"type": "string", "pattern": f"^{CURSOR.pattern}$"},
                OpenApiParameter.QUERY,
                description="The `next` cursor of the previous page.",
            ),
        ],
        responses={200: WebhookAttemptPageSerializer},
    )
    def get(self, request: ApiRequest, webhook_id: str) -> Response:
        limit = page_limit(request.query_params.get("limit"))
        page = endpoints.attempts_page(
            actor=request.context.actor,
            endpoint_id=webhook_id,
            limit=limit,
            before=page_cursor(request.query_params.get("before")),
        )
        return Response(render(WebhookAttemptPageSerializer, page))


class WebhookRedeliverView(AccountAPIView):
    http_method_names = ["post"]

    @extend_schema(
        operation_id="redeliver_webhook_event",
        summary="Send an event again to every endpoint it was for",
        tags=["webhooks"],
        parameters=[EVENT_ID],
        request=None,
        responses={202: WebhookRedeliverySerializer},
    )
    def post(self, request: ApiRequest, event_id: str) -> Response:
        queued = endpoints.redeliver(actor=request.context.actor, event_id=event_id)
        return Response(render(WebhookRedeliverySerializer, (event_id, queued)), status=202)
