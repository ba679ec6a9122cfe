"""The account API (CONTRACT 5): thin views that read input, call one function of
`services.connections`, and render the result. Errors are raised and rendered as problem details
by `services.api.errors`."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from providers.listing import describe_all
from services import connections
from services.api.base import AuditedAPIView, audit_context, mark_audited, note_service
from services.api.parsing import read_credential_input
from services.api.schema import COMMON_HEADERS, CREDENTIAL_EXAMPLES, path_identifier, problems
from services.api.serializers import (
    ConnectedServiceSerializer,
    CredentialInputSerializer,
    ProviderSerializer,
    TestResultSerializer,
)
from services.api.throttling import TestRateThrottle, TokenRateThrottle
from services.exceptions import InvalidRequest, field_error
from services.models import AuditAction, ConnectedService
from services.times import rfc3339


def service_body(connected: ConnectedService | connections.ServiceEntry) -> dict[str, str]:
    return {
        "service": connected.service,
        "connectedAt": rfc3339(connected.connected_at),
        "keyType": connected.key_type,
    }


class AccountAPIView(AuditedAPIView):
    """The account API: account tokens only (an agent token is insufficient scope)."""


class ServiceListView(AccountAPIView):
    http_method_names = ["get", "head"]
    audit_actions = {"get": AuditAction.SERVICES_LIST}

    @extend_schema(
        operation_id="list_services",
        summary="List connected services",
        responses={200: ConnectedServiceSerializer(many=True), **problems(401, 403, 405, 429, 503)},
        parameters=COMMON_HEADERS,
    )
    def get(self, request: Request) -> Response:
        services = connections.list_services(account=request.user)
        return Response([service_body(connected) for connected in services])


class ServiceTestView(AccountAPIView):
    http_method_names = ["post"]
    throttle_classes = [TokenRateThrottle, TestRateThrottle]
    audit_actions = {"post": AuditAction.SERVICES_TEST}

    @extend_schema(
        operation_id="test_credentials",
        summary="Test credentials without storing them",
        description=(
            "Verifies the set at the provider's server-owned endpoint when the catalog has "
            "one: `accepted`, `rejected`, `provider_unavailable`; otherwise `no_verifier` "
            "(ok true, verified false). Nothing is stored."
        ),
        request=CredentialInputSerializer,
        examples=CREDENTIAL_EXAMPLES,
        responses={
            200: TestResultSerializer,
            **problems(400, 401, 403, 405, 413, 415, 429, 503),
        },
        parameters=COMMON_HEADERS,
    )
    def post(self, request: Request) -> Response:
        given = read_credential_input(request)
        credentials = connections.credential_set(service=given.service, fields=given.fields)
        note_service(request, credentials.service)
        verdict = connections.verify_credentials(credentials=credentials)
        return Response(
            {"ok": verdict.ok, "verified": verdict.verified, "reason": verdict.reason.value}
        )


VERIFY_REQUIRED = "required"


def wants_verification(request: Request) -> bool:
    """`?verify=required` asks for verify-on-store; no other value is accepted."""
    value = request.query_params.get("verify")
    if value is None:
        return False
    if value != VERIFY_REQUIRED:
        raise InvalidRequest(
            "The verify parameter takes one value: required.",
            errors=[field_error("verify", "invalid", "Only `required` is accepted.")],
        )
    return True


class CredentialsView(AccountAPIView):
    http_method_names = ["put"]
    throttle_classes = [TokenRateThrottle, TestRateThrottle]
    audit_actions = {"put": AuditAction.SERVICES_STORE}

    def calls_provider(self, request: Request) -> bool:
        # Counted by the test operation's limit only when it asks the provider; a malformed
        # value is refused later, by the view, with 400.
        return request.query_params.get("verify") == VERIFY_REQUIRED

    @extend_schema(
        operation_id="store_credentials",
        summary="Store or replace credentials",
        description=(
            "Stores the complete set, replacing every earlier field of the service "
            "atomically. 201 when the service was not connected, 200 when replaced. With "
            "`?verify=required` the set is first tested at the provider and stored only when "
            "the provider accepts it; otherwise 422 `verification_failed` with its `reason`, "
            "nothing stored and the earlier set untouched. Such a store counts against "
            "CREDVAULT_TEST_RATE_LIMIT as well."
        ),
        parameters=[
            OpenApiParameter(
                "verify",
                str,
                OpenApiParameter.QUERY,
                enum=[VERIFY_REQUIRED],
                description="`required`: store only what the provider accepts.",
            ),
            *COMMON_HEADERS,
        ],
        request=CredentialInputSerializer,
        examples=CREDENTIAL_EXAMPLES,
        responses={
            200: OpenApiResponse(ConnectedServiceSerializer, description="Replaced."),
            201: OpenApiResponse(ConnectedServiceSerializer, description="Newly connected."),
            **problems(400, 401, 403, 405, 409, 413, 415, 422, 429, 503),
        },
    )
    def put(self, request: Request) -> Response:
        verify = wants_verification(request)
        given = read_credential_input(request)
        credentials = connections.credential_set(service=given.service, fields=given.fields)
        note_service(request, credentials.service)
        store = connections.store_verified_credentials if verify else connections.store_credentials
        connected, created = store(
            account=request.user, credentials=credentials, context=audit_context(request)
        )
        mark_audited(request)
        return Response(service_body(connected), status=201 if created else 200)


class ProviderListView(AccountAPIView):
    http_method_names = ["get", "head"]
    audit_actions = {"get": AuditAction.PROVIDERS_LIST}

    @extend_schema(
        operation_id="list_providers",
        summary="List the provider catalog",
        description=(
            "Every catalog provider with the credential shapes it accepts (required and "
            "optional keyNames) and whether each shape is verified here. Any other service "
            "identifier may be stored too, unverified."
        ),
        responses={200: ProviderSerializer(many=True), **problems(401, 403, 405, 429, 503)},
        parameters=COMMON_HEADERS,
    )
    def get(self, request: Request) -> Response:
        return Response(describe_all())


class ServiceCredentialsView(AccountAPIView):
    http_method_names = ["delete"]
    audit_actions = {"delete": AuditAction.SERVICES_REMOVE}

    @extend_schema(
        operation_id="remove_service",
        summary="Remove a service's credentials",
        parameters=[path_identifier("service", "The service to remove."), *COMMON_HEADERS],
        responses={204: None, **problems(400, 401, 403, 404, 405, 429, 503)},
    )
    def delete(self, request: Request, service: str) -> Response:
        normalized = connections.service_identifier(service)
        note_service(request, normalized)
        connections.remove_service(
            account=request.user, service=normalized, context=audit_context(request)
        )
        mark_audited(request)
        return Response(status=204)
