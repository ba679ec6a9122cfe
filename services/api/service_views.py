"""The account API's connected services: thin views that read input, call one
function of `services.credentials`, and render the result. Errors are raised and rendered as
problem details by `services.api.errors`."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from services import credentials
from services.api.base import AccountAPIView
from services.api.context import ApiRequest
from services.api.parsing import read_credential_input
from services.api.rendering import render, render_many
from services.api.schema import CREDENTIAL_EXAMPLES, path_identifier
from services.api.serializers import (
    ConnectedServiceSerializer,
    CredentialInputSerializer,
    ListedServiceSerializer,
    ProviderSerializer,
    VerificationResultSerializer,
)
from services.api.throttling import TestRateThrottle, TokenRateThrottle
from services.audit import Operation
from services.exceptions import FieldErrorCode, InvalidRequest, field_error


class ServiceListView(AccountAPIView):
    http_method_names = ["get", "head"]
    operations = {"get": Operation.LIST_SERVICES}

    @extend_schema(
        operation_id="list_services",
        summary="List connected services",
        tags=["services"],
        responses={200: ListedServiceSerializer(many=True)},
    )
    def get(self, request: ApiRequest) -> Response:
        services = credentials.list_services(actor=request.context.actor)
        return Response(render_many(ListedServiceSerializer, services))


class ServiceTestView(AccountAPIView):
    http_method_names = ["post"]
    throttle_classes = [TokenRateThrottle, TestRateThrottle]
    operations = {"post": Operation.TEST_CREDENTIALS}

    @extend_schema(
        operation_id="verify_credentials",
        summary="Test credentials without storing them",
        tags=["services"],
        description=(
            "Verifies the set at the provider's server-owned endpoint when the catalog has "
            "one: `accepted`, `rejected`, `provider_unavailable`; otherwise `no_verifier` "
            "(ok true, verified false). Nothing is stored."
        ),
        request=CredentialInputSerializer,
        examples=CREDENTIAL_EXAMPLES,
        responses={200: VerificationResultSerializer},
    )
    def post(self, request: ApiRequest) -> Response:
        given = read_credential_input(request)
        checked = credentials.credential_set(service=given.service, fields=given.fields)
        request.context.service = checked.service
        verdict = credentials.verify_credentials(actor=request.context.actor, credentials=checked)
        return Response(render(VerificationResultSerializer, verdict))


VERIFY_REQUIRED = "required"


def wants_verification(request: Request) -> bool:
    """`?verify=required` asks for verify-on-store; no other value is accepted."""
    value = request.query_params.get("verify")
    if value is None:
        return False
    if value != VERIFY_REQUIRED:
        raise InvalidRequest(
            "The verify parameter takes one value: required.",
            errors=[field_error("verify", FieldErrorCode.INVALID, "Only `required` is accepted.")],
        )
    return True


class CredentialsView(AccountAPIView):
    http_method_names = ["put"]
    throttle_classes = [TokenRateThrottle, TestRateThrottle]
    operations = {"put": Operation.CONNECT_SERVICE}
    problems = (409, 422)  # beyond those every body or path can answer (services.api.schema)

    def calls_provider(self, request: Request) -> bool:
        # Counted by the test operation's limit only when it asks the provider; a malformed
        # value is refused later, by the view, with 400.
        return request.query_params.get("verify") == VERIFY_REQUIRED

    @extend_schema(
        operation_id="store_credentials",
        summary="Store or replace credentials",
        tags=["services"],
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
                # One accepted value: a pattern, not a one-value enum that client generators
                # turn into a class of its own.
                {"type": "string", "pattern": f"^{VERIFY_REQUIRED}$"},
                OpenApiParameter.QUERY,
                description=f"`{VERIFY_REQUIRED}`, the only value: store only what the "
                "provider accepts.",
            ),
        ],
        request=CredentialInputSerializer,
        examples=CREDENTIAL_EXAMPLES,
        responses={
            200: OpenApiResponse(ConnectedServiceSerializer, description="Replaced."),
            201: OpenApiResponse(ConnectedServiceSerializer, description="Newly connected."),
        },
    )
    def put(self, request: ApiRequest) -> Response:
        verify = wants_verification(request)
        given = read_credential_input(request)
        checked = credentials.credential_set(service=given.service, fields=given.fields)
        request.context.service = checked.service
        store = credentials.store_verified_credentials if verify else credentials.store_credentials
        stored = store(actor=request.context.actor, credentials=checked)
        return Response(
            render(ConnectedServiceSerializer, stored.entry), status=stored.event.status
        )


class ProviderListView(AccountAPIView):
    http_method_names = ["get", "head"]
    operations = {"get": Operation.LIST_PROVIDERS}

    @extend_schema(
        operation_id="list_providers",
        summary="List the provider catalog",
        tags=["providers"],
        description=(
            "Every catalog provider with the credential shapes it accepts (required and "
            "optional keyNames) and whether each shape is verified here. Any other service "
            "identifier may be stored too, unverified."
        ),
        responses={200: ProviderSerializer(many=True)},
    )
    def get(self, request: ApiRequest) -> Response:
        return Response(credentials.list_providers(actor=request.context.actor))


class ServiceCredentialsView(AccountAPIView):
    http_method_names = ["delete"]
    operations = {"delete": Operation.REMOVE_SERVICE}

    @extend_schema(
        operation_id="remove_service",
        summary="Remove a service's credentials",
        tags=["services"],
        parameters=[path_identifier("service", "The service to remove.", "github")],
        responses={204: OpenApiResponse(description="Removed.")},
    )
    def delete(self, request: ApiRequest, service: str) -> Response:
        event = credentials.remove_service(actor=request.context.actor, service=service)
        return Response(status=event.status)
