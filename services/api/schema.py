"""The OpenAPI document's pieces beyond the serializers: the schema class, which adds the
problems and headers of every operation, the bearer schemes, shared parameters and examples.
(The document's views are in `docs.py`: drf-spectacular's views read DEFAULT_SCHEMA_CLASS,
this module's, when they are imported.) A view declares its success responses, and in
`problems` the statuses of its own that neither its path nor its body implies.
"""

from __future__ import annotations

from copy import deepcopy

from drf_spectacular.drainage import has_override
from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework.serializers import ListSerializer

from providers.identifiers import NORMALIZATION_RULE, SERVICE_RULE
from services.api.serializers import ProblemSerializer
from services.api.wsgi import MAX_BODY_BYTES, PROXY_PATH_PREFIX

PROBLEM_JSON = "application/problem+json"
BODY_LIMIT = f"{MAX_BODY_BYTES // 1024} KiB"

PROBLEM_DESCRIPTIONS = {
    400: "Invalid body, parameter or identifier (malformed_json, invalid_request with "
    "`errors`, invalid_service), a path a brokered call cannot take (invalid_proxy_path), a "
    "body on a brokered GET or HEAD (invalid_proxy_request), a brokered call to a GraphQL "
    "endpoint that is not a GraphQL request credvault can read (invalid_graphql), a "
    "Host header this server does not serve "
    "(invalid_request), or a malformed HTTP message: a body that ended before its "
    "Content-Length, a bad chunk or request line, chunked with a Content-Length "
    "(bad_request, never processed).",
    401: "No token (not_authenticated) or a malformed, unknown, revoked or expired one "
    "(invalid_token).",
    403: "A token of the other kind (insufficient_scope, with the RFC 6750 challenge), no "
    "grant for the service or a brokered call's method or path outside it (not_granted), a "
    "brokered call to an endpoint that creates, reveals or widens a credential that the "
    "grant does not name explicitly, or a GraphQL mutation of that kind that the grant's "
    "`graphql` does not name (sensitive_endpoint), or a plaintext read under a grant "
    "for brokered calls only (read_not_granted).",
    404: "Not connected (service_not_connected), no such agent (agent_not_found), no such "
    "token (token_not_found), no approval or access request of the account (or of the "
    "agent) with the id (approval_not_found), no OAuth for the provider "
    "(oauth_not_supported) or no OAuth client of the account for it (oauth_client_not_found), "
    "or no such path (not_found: a path parameter holding `/`).",
    405: "Method not allowed (method_not_allowed); see the Allow header.",
    408: "The body did not arrive within CREDVAULT_BODY_TIMEOUT (request_timeout); nothing "
    "was processed.",
    409: "The account has reached CREDVAULT_MAX_SERVICES_PER_ACCOUNT (service_limit_reached), "
    "credvault cannot make calls for the service (not_proxyable), the provider refused to "
    "refresh its OAuth set (reauthorization_required: the person connects it again), or "
    "refused the OAuth client itself while refreshing it (oauth_client_misconfigured: the "
    "account corrects its client; nothing changed), or the approval was decided already or "
    "expired (approval_decided: a decision is final).",
    411: "A chunked body without Content-Length on a server that cannot mark its end "
    "(length_required). gunicorn marks it; other WSGI servers may not.",
    413: f"Body over {BODY_LIMIT}, or a brokered call's over CREDVAULT_PROXY_MAX_BODY "
    "(payload_too_large), refused before it is read.",
    414: "A request line over the server's limit (uri_too_long).",
    415: "Not application/json in UTF-8 (unsupported_media_type).",
    431: "A header field, or the header section, over the server's limits "
    "(request_header_too_large).",
    422: "With ?verify=required: the provider did not accept the set (verification_failed, "
    "with `reason`); nothing was stored.",
    429: "Rate limit of the token reached, or its brokered calls in flight at "
    "CREDVAULT_PROXY_MAX_CONCURRENT (rate_limited); see Retry-After. An agent already waiting "
    "on 5 decisions, its call approvals and access requests together (too_many_pending).",
    500: "Internal error (internal_error), with no detail of the cause.",
    502: "A brokered call got no usable answer: the provider could not be reached or its "
    "address is not a public one (upstream_unavailable), its answer is over "
    "CREDVAULT_PROXY_MAX_RESPONSE (upstream_too_large), or its answer is malformed: a "
    "Transfer-Encoding other than chunked, a header that holds a control character or does "
    "not parse (upstream_bad_answer).",
    503: "The database cannot be reached (service_unavailable), or an OAuth set's token URL "
    "could not be reached to refresh it (provider_unavailable; nothing changed).",
    504: "A brokered call's provider did not answer within CREDVAULT_PROXY_TIMEOUT "
    "(upstream_timeout).",
}

# What any operation can answer, whatever it does (PROBLEM_DESCRIPTIONS says when).
EVERY_OPERATION = (400, 401, 403, 405, 408, 411, 414, 429, 431, 500, 503)
# Answered before Django, so without a request id: by the WSGI wrapper (408, 411, and 400
# for a malformed body) or by gunicorn itself (414, 431, 400 for a malformed message).
BEFORE_DJANGO = {408, 411, 414, 431}

BODY_RULE = (
    f"UTF-8 JSON (`application/json`; another media type or charset is 415) of at most "
    f"{BODY_LIMIT} (413 beyond, before it is read). Strict JSON: duplicate member names, NaN, "
    "Infinity and lone surrogates are 400 malformed_json; a member not listed is 400 "
    "invalid_request."
)


class CredvaultAutoSchema(AutoSchema):
    """drf-spectacular's schema, which also states, as the strict reader checks them, that an
    object takes exactly its properties and a nested list's length bounds
    (`Serializer(many=True, min_length=..., max_length=...)`); the size and syntax rules of
    every request body; the problems an operation can answer and every response's headers: no
    view repeats them, none can forget one."""

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, ListSerializer):
            # DRF's ListSerializer has min_length and max_length; its stubs do not say so.
            low, high = field.min_length, field.max_length  # type: ignore[attr-defined]
            if low is not None:
                schema["minItems"] = low
            if high is not None:
                schema["maxItems"] = high
        return schema

    def _insert_field_validators(self, field, schema):
        # A field whose schema is declared (`extend_schema_field`) is stated by that alone:
        # an event type is its enum, whatever length the strict reader checks first.
        if not has_override(field, "field"):
            super()._insert_field_validators(field, schema)

    def _map_basic_serializer(self, serializer, direction):
        # Exactly its properties, as the strict reader takes (any other member is 400).
        return super()._map_basic_serializer(serializer, direction) | {
            "additionalProperties": False
        }

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body is not None:
            body["description"] = BODY_RULE
            if self.method == "PATCH":
                # A change is a JSON object of the members to change; without one it is 415.
                body["required"] = True
        return body

    def problem_statuses(self) -> set[int]:
        """EVERY_OPERATION's, 404 with a path parameter, 413 and 415 with a body, and the
        view's own (`problems`)."""
        statuses = {*EVERY_OPERATION, *getattr(self.view, "problems", ())}
        if "{" in self.path:
            statuses.add(404)
        if self.method in {"PUT", "POST", "PATCH"} and self.get_request_serializer():
            statuses |= {413, 415}
        return statuses

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        problem = {
            PROBLEM_JSON: {"schema": self.resolve_serializer(ProblemSerializer, direction).ref}
        }
        for status in self.problem_statuses():
            responses.setdefault(
                str(status),
                {"description": PROBLEM_DESCRIPTIONS[status], "content": deepcopy(problem)},
            )
        proxied = self.path.startswith(PROXY_PATH_PREFIX)
        for code, response in responses.items():
            response["headers"] = response_headers(int(code), proxied=proxied)
        return dict(sorted(responses.items()))


def _header(description: str, *, required: bool = True) -> dict:
    return {"schema": {"type": "string"}, "description": description, "required": required}


REQUEST_ID = "The request's id, as in the access log."
# The headers of the answers of one status, beside Cache-Control and the request id.
STATUS_HEADERS = {
    401: {
        "WWW-Authenticate": _header(
            'Bearer realm="credvault", with error="invalid_token" for a refused token.'
        )
    },
    403: {
        "WWW-Authenticate": _header(
            'Bearer realm="credvault", error="insufficient_scope", for a token of the other '
            "kind (not with not_granted).",
            required=False,
        )
    },
    405: {"Allow": _header("The methods this path allows.")},
    429: {"Retry-After": _header("Seconds until the token may send again.")},
}
# On a brokered call's answer, which may be the provider's: it keeps the provider's own
# X-Request-ID (if it sent one) and carries credvault's id in X-Credvault-Request-Id.
PROXIED_HEADERS = {
    "X-Request-ID": _header(
        "credvault's id on credvault's own answers; the provider's own, if it sent one, on the "
        "provider's answers.",
        required=False,
    ),
    "X-Credvault-Error": _header(
        "The problem's code, on credvault's own answers (a refusal, a timeout); absent from "
        "the provider's.",
        required=False,
    ),
}


def response_headers(status: int, *, proxied: bool = False) -> dict[str, dict]:
    """The headers of every response of this status, as the server sends them (the request
    id is sent from Django on, but not with a 400 of a malformed message)."""
    headers = {"Cache-Control": _header("Always no-store.")}
    has_id = status not in BEFORE_DJANGO and status != 400
    if proxied:
        headers |= PROXIED_HEADERS
        headers["X-Credvault-Request-Id"] = _header(REQUEST_ID, required=has_id)
    elif status not in BEFORE_DJANGO:
        headers["X-Request-ID"] = _header(REQUEST_ID, required=has_id)
    # Copies: no two places in the document share one object.
    return deepcopy(headers | STATUS_HEADERS.get(status, {}))


def path_identifier(name: str, description: str, example: str) -> OpenApiParameter:
    """A service identifier or agent name in the path, as sent: normalized by the server, so
    no pattern (one of the normalized form would refuse `GitHub`)."""
    return OpenApiParameter(
        name,
        {"type": "string", "minLength": 1},
        OpenApiParameter.PATH,
        description=f"{description} {NORMALIZATION_RULE}; the result must be {SERVICE_RULE}. "
        "Anything else is 400.",
        examples=[OpenApiExample(example, value=example)],
    )


class GrantEntryFieldSchema(OpenApiSerializerFieldExtension):
    """A grant entry: a service identifier, or the GrantInput object."""

    target_class = "services.api.serializers.GrantEntryField"

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        text = auto_schema._map_serializer_field(field.text, direction)
        grant = auto_schema.resolve_serializer(type(field.grant), direction).ref
        return {"oneOf": [text, grant]}


class AccountTokenScheme(OpenApiAuthenticationExtension):
    target_class = "services.api.authentication.AccountTokenAuthentication"
    name = "accountToken"
    description = "An account API token: `.venv/bin/python manage.py issue_token ACCOUNT`."
    bearer_format = "cvt_ followed by 46 base62 characters"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": self.bearer_format,
            "description": self.description,
        }


class AgentTokenScheme(AccountTokenScheme):
    target_class = "services.api.authentication.AgentTokenAuthentication"
    name = "agentToken"
    bearer_format = "cva_ followed by 46 base62 characters"
    description = (
        "An agent token: POST /api/v1/agents/{name}/tokens. The agent API also reads it from "
        "`Authorization: token ...`, from `Authorization: Basic` (as the user or the password, "
        "whatever the other part is: it is dropped) and, on a brokered call, from the header of "
        "the service's credential placement (`x-api-key`, `PRIVATE-TOKEN`), so that a "
        "provider's SDK works unchanged; two different tokens are 400 ambiguous_credentials."
    )


def request_examples(named: dict[str, object]) -> list[OpenApiExample]:
    """Examples of a request body, by name."""
    return [OpenApiExample(name, value=value, request_only=True) for name, value in named.items()]


CREDENTIAL_EXAMPLES = request_examples(
    {
        "An API key": {
            "service": "github",
            "credentials": [{"keyName": "api_key", "value": "ghp_x"}],
        },
        "A service as typed (normalized to github)": {
            "service": " GitHub ",
            "credentials": [{"keyName": "api_key", "value": "ghp_y"}],
        },
        "OAuth tokens": {
            "service": "slack",
            "credentials": [
                {"keyName": "access_token", "value": "xoxp-1"},
                {"keyName": "refresh_token", "value": "xoxe-1"},
            ],
        },
        "A service outside the catalog": {
            "service": "my-internal-api",
            "credentials": [
                {"keyName": "client_id", "value": "id-1"},
                {"keyName": "client_secret", "value": "secret-1"},
            ],
        },
    }
)
AGENT_EXAMPLES = request_examples(
    {
        "Grant two services": {"services": ["github", "slack"]},
        "A grant that expires and asks before it writes": {
            "services": [
                {
                    "service": "github",
                    "expiresAt": "2026-12-31T18:00:00Z",
                    "approve": [{"methods": ["POST", "PUT", "PATCH", "DELETE"]}],
                }
            ]
        },
    }
)
OAUTH_CLIENT_EXAMPLES = request_examples(
    {
        "A GitHub OAuth app": {
            "clientId": "Iv1.0123456789abcdef",
            "clientSecret": "0123456789abcdef0123",
        }
    }
)
WEBHOOK_EXAMPLES = request_examples(
    {
        "Every event": {"url": "https://hooks.example.com/credvault"},
        "Broken connections only": {
            "url": "https://hooks.example.com/credvault",
            "events": ["oauth.reauthorization_required", "connection.verification_failed"],
            "description": "on-call",
        },
    }
)
WEBHOOK_CHANGE_EXAMPLES = request_examples(
    {"Resume a disabled endpoint": {"enabled": True}, "Every event": {"events": []}}
)
CONNECT_EXAMPLES = request_examples(
    {
        "The catalog's scopes": {},
        "Chosen scopes, stored as another service": {
            "scopes": ["read:user", "repo"],
            "service": "github-work",
        },
    }
)
TOKEN_EXAMPLES = request_examples({"Expiring in 30 days": {"expiresInDays": 30}, "No expiry": {}})
