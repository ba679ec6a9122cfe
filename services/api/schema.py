"""OpenAPI pieces shared by the views: the bearer scheme and the problem responses."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from services.api.serializers import ProblemSerializer
from services.identifiers import SERVICE_SCHEMA_PATTERN

PROBLEM_DESCRIPTIONS = {
    400: "Invalid body or service identifier (malformed_json, invalid_request, invalid_service).",
    401: "No token (not_authenticated) or a malformed, unknown, revoked or expired one "
    "(invalid_token).",
    403: "A token of the other kind (insufficient_scope, with the RFC 6750 challenge), or no "
    "grant for the service (not_granted).",
    404: "Not connected (service_not_connected), no such agent (agent_not_found) or no such "
    "path (not_found).",
    405: "Method not allowed; see the Allow header.",
    409: "The account has reached CREDVAULT_MAX_SERVICES_PER_ACCOUNT (service_limit_reached).",
    413: "Body over 64 KiB (payload_too_large).",
    415: "Not application/json in UTF-8 (unsupported_media_type).",
    422: "With ?verify=required: the provider did not accept the set (verification_failed, "
    "with `reason`); nothing was stored.",
    429: "Rate limit of the token reached (rate_limited); see Retry-After.",
    500: "Internal error (internal_error).",
    503: "The database cannot be reached (service_unavailable).",
}


def close_objects(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing: every object schema takes exactly its properties, as
    the strict reader does (a body with any other member is 400)."""

    def close(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(result.get("components", {}).get("schemas", {}))
    return result


def path_identifier(name: str, description: str) -> OpenApiParameter:
    """A service identifier or agent name in the path, in its normalized form."""
    return OpenApiParameter(
        name,
        str,
        OpenApiParameter.PATH,
        description=f"{description} Normalized like a service identifier.",
        pattern=SERVICE_SCHEMA_PATTERN,
    )


def problems(*statuses: int) -> dict:
    return {
        (status, "application/problem+json"): OpenApiResponse(
            ProblemSerializer, description=PROBLEM_DESCRIPTIONS[status]
        )
        for status in statuses
    }


def _header(name: str, description: str, statuses: list[int] | bool) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        OpenApiTypes.STR,
        location=OpenApiParameter.HEADER,
        description=description,
        response=statuses,
    )


COMMON_HEADERS = [
    _header("Cache-Control", "Always no-store.", True),
    _header("X-Request-ID", "The request's id, as in the access log.", True),
    _header(
        "WWW-Authenticate",
        'Bearer realm="credvault", with error="invalid_token" or error="insufficient_scope".',
        [401, 403],
    ),
    _header("Allow", "The methods this path allows.", [405]),
    _header("Retry-After", "Seconds until the token may send again.", [429]),
]


class AccountTokenScheme(OpenApiAuthenticationExtension):
    target_class = "services.api.authentication.AccountTokenAuthentication"
    name = "accountToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "cvt_ followed by 46 base62 characters",
            "description": "An account API token: `python manage.py issue_token ACCOUNT`.",
        }


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "services.api.authentication.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "cva_ followed by 46 base62 characters",
            "description": "An agent token: POST /api/v1/agents/{name}/tokens.",
        }


CREDENTIAL_EXAMPLES = [
    OpenApiExample(
        "An API key",
        value={"service": "github", "credentials": [{"keyName": "api_key", "value": "ghp_x"}]},
        request_only=True,
    ),
    OpenApiExample(
        "OAuth tokens",
        value={
            "service": "slack",
            "credentials": [
                {"keyName": "access_token", "value": "xoxp-1"},
                {"keyName": "refresh_token", "value": "xoxe-1"},
            ],
        },
        request_only=True,
    ),
    OpenApiExample(
        "A service outside the catalog",
        value={
            "service": "my-internal-api",
            "credentials": [
                {"keyName": "client_id", "value": "id-1"},
                {"keyName": "client_secret", "value": "secret-1"},
            ],
        },
        request_only=True,
    ),
]

AGENT_EXAMPLES = [
    OpenApiExample(
        "Grant two services", value={"services": ["github", "slack"]}, request_only=True
    ),
]

TOKEN_EXAMPLES = [
    OpenApiExample("Expiring in 30 days", value={"expiresInDays": 30}, request_only=True),
]
