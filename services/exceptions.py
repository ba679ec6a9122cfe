"""Every problem the server answers: each class carries its HTTP status, its problem code and
its default detail. `problem_document` writes the RFC 9457 body of every one of them, whether
Django answers (`services/api/errors.py`) or the WSGI wrapper or gunicorn answers before it
(`services/api/wsgi.py`, `services/api/serving.py`). Messages never hold a value.

These classes are the one list of problem codes: `problem_code_choices()` collects them for the
OpenAPI document, which states `code` as a closed set. `FieldErrorCode` is the one list of the
codes of `errors[]`.
"""

from __future__ import annotations

import json
from enum import StrEnum
from http import HTTPStatus
from typing import Any

from rest_framework import status
from rest_framework.exceptions import APIException

from providers.identifiers import SERVICE_RULE

# The RFC 6750 challenge of every 401 and scope refusal.
REALM = 'Bearer realm="credvault"'


class ProblemError(APIException):
    """An error with a status, a problem code, a detail, and optionally field errors."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_request"
    default_detail = "The request is invalid."

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail or self.default_detail, self.default_code)
        self.errors = errors
        self.headers = headers or {}
        # Further members of the problem document (RFC 9457 extensions), such as `reason`.
        self.extra = extra or {}


class AccountError(ValueError):
    """A refused account or token operation (the commands' one-line error); the message is safe
    to print."""


class FieldErrorCode(StrEnum):
    """The `code` of an entry of `errors`: what is wrong with the field it names."""

    UNKNOWN_MEMBER = "unknown_member"
    REQUIRED = "required"
    DUPLICATE = "duplicate"
    INVALID_TYPE = "invalid_type"
    INVALID_LENGTH = "invalid_length"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    INVALID = "invalid"
    INVALID_SERVICE = "invalid_service"
    MISSING_FIELD = "missing_field"
    UNEXPECTED_FIELD = "unexpected_field"
    # An approval of an access request that grants more than the agent asked for.
    WIDER_THAN_ASKED = "wider_than_asked"


def field_error(field: str, code: FieldErrorCode, message: str) -> dict[str, str]:
    """One entry of `errors`. A code outside FieldErrorCode is a programming error: it raises
    here rather than reach a client as a code the document does not list."""
    return {"field": field, "code": FieldErrorCode(code).value, "message": message}


class MalformedJSON(ProblemError):
    default_code = "malformed_json"
    default_detail = "The body is not strict JSON."


class InvalidRequest(ProblemError):
    default_code = "invalid_request"
    default_detail = "The body does not have the expected shape; see errors."


class InvalidIdentifier(ProblemError):
    """A service identifier or agent name that does not normalize (`services/identifiers.py`):
    400 naming its field with the rule. The one error of a bad identifier; a subclass says how
    each kind is answered."""

    field = "service"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(
            detail,
            errors=[field_error(self.field, FieldErrorCode.INVALID, SERVICE_RULE)],
        )


class InvalidService(InvalidIdentifier):
    default_code = "invalid_service"
    default_detail = "The service identifier is not valid."


class InvalidAgentName(InvalidIdentifier):
    default_code = "invalid_request"
    default_detail = "The agent name is not valid."
    field = "name"


class ServiceNotConnected(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "service_not_connected"
    default_detail = "No credentials are stored for this service."


class NotGranted(ProblemError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "not_granted"
    default_detail = "This agent has no grant for the service."


class ReadNotGranted(ProblemError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "read_not_granted"
    default_detail = (
        "This agent's grant allows brokered calls only (/api/v1/agent/proxy/...); the account "
        'can give it access "read" to read the plaintext.'
    )


class SensitiveEndpointRefused(ProblemError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "sensitive_endpoint"
    default_detail = (
        "This endpoint creates, reveals or widens a credential: the grant must name its path "
        "explicitly."
    )


class TooManyCallsInFlight(ProblemError):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "rate_limited"
    default_detail = "Too many brokered calls of this token in flight."

    def __init__(self, wait: int) -> None:
        super().__init__(
            f"Too many brokered calls of this token in flight. Retry after {wait} seconds.",
            headers={"Retry-After": str(wait)},
        )


class AmbiguousCredentials(ProblemError):
    default_code = "ambiguous_credentials"
    default_detail = "The request carries two different tokens; send one."


class InvalidProxyPath(ProblemError):
    default_code = "invalid_proxy_path"
    default_detail = (
        "The path cannot be proxied: a segment, percent-decoded once, is empty, '.' or '..' "
        "(judged before a ';' and between encoded slashes too), or holds a backslash or a "
        "control character, or the path leaves the provider's API."
    )


class InvalidProxyRequest(ProblemError):
    default_code = "invalid_proxy_request"
    default_detail = (
        "A GET, HEAD or OPTIONS request cannot carry a body through the proxy: a provider may "
        "read it as the start of another request."
    )


class NotProxyable(ProblemError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "not_proxyable"
    default_detail = "credvault cannot make calls for this service."


class UpstreamTimeout(ProblemError):
    status_code = status.HTTP_504_GATEWAY_TIMEOUT
    default_code = "upstream_timeout"
    default_detail = "The provider did not answer in time."


class UpstreamTooLarge(ProblemError):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "upstream_too_large"
    default_detail = "The provider's answer is larger than credvault passes on."


class UpstreamUnavailable(ProblemError):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "upstream_unavailable"
    default_detail = "The provider could not be reached."


class UpstreamBadAnswer(ProblemError):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "upstream_bad_answer"
    default_detail = (
        "The provider's answer is malformed (a Transfer-Encoding other than chunked, a header "
        "that holds a control character or does not parse, or a Content-Length that does not "
        "say one length): it was not passed on."
    )


class ReauthorizationRequired(ProblemError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "reauthorization_required"
    default_detail = (
        "The provider refused to refresh this OAuth connection: the person connects it again."
    )


class OAuthClientMisconfigured(ProblemError):
    """The provider refused the OAuth client itself while refreshing (its client ID or secret,
    `invalid_client` and the like): the account's configuration, not the person's consent, is
    at fault, so the connection keeps its status and its set."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "oauth_client_misconfigured"
    default_detail = (
        "The OAuth client is misconfigured: the provider refused its client ID or secret "
        "while refreshing this connection. Nothing was changed; once the account's OAuth "
        "client (PUT /api/v1/oauth-clients/{provider}), or the set's own client_id and "
        "client_secret, is corrected, the next use refreshes again."
    )


class ProviderUnavailable(ProblemError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "provider_unavailable"
    default_detail = "The provider's token URL could not be reached; nothing was changed."


class OAuthNotSupported(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "oauth_not_supported"
    default_detail = "The catalog has no OAuth connection for this provider."


class OAuthClientNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "oauth_client_not_found"
    default_detail = "The account has no OAuth client for this provider."


class InsufficientScope(ProblemError):
    """An agent token on the account API or an account token on the agent API (RFC 6750)."""

    status_code = status.HTTP_403_FORBIDDEN
    default_code = "insufficient_scope"
    default_detail = "This kind of token does not give access to this API."

    def __init__(self) -> None:
        super().__init__(headers={"WWW-Authenticate": f'{REALM}, error="insufficient_scope"'})


class AgentNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "agent_not_found"
    default_detail = "The account has no agent of this name."


class TokenNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "token_not_found"
    default_detail = "The agent has no token with this prefix."


class ServiceLimitReached(ProblemError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "service_limit_reached"
    default_detail = "The account has reached its limit of connected services."


class VerificationFailed(ProblemError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "verification_failed"
    default_detail = "The provider did not accept the credentials; nothing was stored."

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The provider did not accept the credentials ({reason}); nothing was stored and "
            "any earlier set is unchanged.",
            extra={"reason": reason},
        )


class PayloadTooLarge(ProblemError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"
    default_detail = "The body is larger than this endpoint accepts."

    @classmethod
    def over(cls, most: int) -> PayloadTooLarge:
        """The one sentence of every refusal by size, naming the limit (`body_limit`)."""
        return cls(f"The body is larger than {most} bytes.")


class UnsupportedMediaType(ProblemError):
    status_code = status.HTTP_415_UNSUPPORTED_MEDIA_TYPE
    default_code = "unsupported_media_type"
    default_detail = "The body must be sent as Content-Type: application/json in UTF-8."


class ServiceUnavailable(ProblemError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "service_unavailable"
    default_detail = "The database cannot be reached. Try again shortly."


class LengthRequired(ProblemError):
    """A chunked body on a server that cannot mark its end (`services/api/wsgi.py`)."""

    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_code = "length_required"
    default_detail = "Send the body with a Content-Length header."


class MalformedRequest(ProblemError):
    """An HTTP message whose framing is broken (RFC 9112): a body that ended before its
    Content-Length, a bad chunk, a bad request line or header. Never processed. Answered by
    the WSGI wrapper (`services/api/wsgi.py`) or, before Django, by gunicorn's error writer
    (`services/api/serving.py`)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"
    default_detail = "The HTTP message is malformed (RFC 9112); nothing was processed."


class BodyTimeout(ProblemError):
    """A body that did not arrive within CREDVAULT_BODY_TIMEOUT (`services/api/wsgi.py`)."""

    status_code = status.HTTP_408_REQUEST_TIMEOUT
    default_code = "request_timeout"
    default_detail = "The request body did not arrive in time; nothing was processed."


class UriTooLong(ProblemError):
    """A request line over gunicorn's limit (`services/api/serving.py`)."""

    status_code = status.HTTP_414_REQUEST_URI_TOO_LONG
    default_code = "uri_too_long"
    default_detail = "The request line is too long."


class HeaderTooLarge(ProblemError):
    """A header field, or the header section, over gunicorn's limits
    (`services/api/serving.py`)."""

    status_code = status.HTTP_431_REQUEST_HEADER_FIELDS_TOO_LARGE
    default_code = "request_header_too_large"
    default_detail = "A request header field, or all of them together, is too large."


class MissingToken(ProblemError):
    status_code = status.HTTP_401_UNAUTHORIZED
    default_code = "not_authenticated"
    default_detail = "Send an account API token: Authorization: Bearer <token>."

    def __init__(self) -> None:
        super().__init__(headers={"WWW-Authenticate": REALM})


class TokenRefused(ProblemError):
    """The one answer to a malformed, unknown, revoked or expired token, or a deactivated
    account: the same body in every case."""

    status_code = status.HTTP_401_UNAUTHORIZED
    default_code = "invalid_token"
    default_detail = "The token is malformed, unknown, revoked or expired."

    def __init__(self) -> None:
        super().__init__(headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'})


class Forbidden(ProblemError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "forbidden"
    default_detail = "The request is not allowed."


class PathNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "not_found"
    default_detail = "There is nothing at this path."


class UnsupportedMethod(ProblemError):
    status_code = status.HTTP_405_METHOD_NOT_ALLOWED
    default_code = "method_not_allowed"
    default_detail = "This path does not allow the method."


class RateLimited(ProblemError):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "rate_limited"
    default_detail = "Too many requests with this token."

    def __init__(self, wait: int) -> None:
        super().__init__(
            f"Too many requests with this token. Retry after {wait} seconds.",
            headers={"Retry-After": str(wait)},
        )


class InternalError(ProblemError):
    status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
    default_code = "internal_error"
    default_detail = "An internal error occurred."


def problem_document(
    status: int,
    code: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """The RFC 9457 body of every problem the server answers, from Django
    (`services/api/errors.py`) or before it (`services/api/wsgi.py`, `serving.py`)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    body.update(extra or {})
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _problem_classes(base: type[ProblemError] = ProblemError) -> list[type[ProblemError]]:
    classes = [base]
    for subclass in base.__subclasses__():
        classes += _problem_classes(subclass)
    return classes


def problem_code_choices() -> list[tuple[str, str]]:
    """(code, default detail) of every problem the server answers, sorted by code: the closed
    set of `code` in the OpenAPI document."""
    details: dict[str, str] = {}
    for problem in _problem_classes():
        details.setdefault(problem.default_code, str(problem.default_detail))
    return sorted(details.items())


class UpstreamForeignRedirect(ProblemError):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "upstream_foreign_redirect"
    default_detail = (
        "The provider redirected the call away from its API, and credvault does not follow that "
        "redirect: only a 301, 302 or 303 answer to a GET or HEAD is followed, without the "
        "credential, for at most 3 hops, to an address the outbound rules allow."
    )


class InvalidGraphQL(ProblemError):
    default_code = "invalid_graphql"
    default_detail = (
        "A brokered call to a GraphQL endpoint must be a GraphQL request credvault can read: "
        "JSON with a `query` document that parses (or a batch of them)."
    )


class AgentTokenInRequest(ProblemError):
    default_code = "agent_token_in_request"
    default_detail = (
        "The request carries a credvault token (cva_ or cvt_) outside the places the agent "
        "token is read from (another header, the query string, another path segment, the "
        "body): nothing was sent, so that no provider ever receives one."
    )


class ApprovalProblem(ProblemError):
    """A brokered call that needs a person's approval and does not hold one (consent: the
    agent repeats the same request once a member decided; docs/consent.md). Each names the
    approval (`approvalId`, `approvalUrl`, `expiresAt`), and nothing was sent."""

    status_code = status.HTTP_403_FORBIDDEN

    def __init__(
        self,
        *,
        approval_id: str,
        approval_url: str,
        expires_at: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            headers=headers,
            extra={"approvalId": approval_id, "approvalUrl": approval_url, "expiresAt": expires_at},
        )
        self.approval_id = approval_id


class ApprovalRequired(ApprovalProblem):
    default_code = "approval_required"
    default_detail = (
        "This call needs a person's approval: nothing was sent. A member of the account decides "
        "at approvalUrl; then repeat the same request (optionally with X-Credvault-Approval: "
        "approvalId, or Prefer: wait=N to wait for the decision)."
    )


class ApprovalPending(ApprovalProblem):
    default_code = "approval_pending"
    default_detail = (
        "The approval of this call waits for a member's decision: nothing was sent. Repeat the "
        "same request after Retry-After seconds."
    )


class ApprovalDenied(ApprovalProblem):
    default_code = "approval_denied"
    default_detail = "A member of the account denied this call: nothing was sent."


class ApprovalExpired(ApprovalProblem):
    default_code = "approval_expired"
    default_detail = (
        "The approval of this call expired before it was decided or used: nothing was sent. "
        "Repeat the request to ask again."
    )


class ApprovalMismatch(ProblemError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "approval_mismatch"
    default_detail = (
        "The approval named by X-Credvault-Approval is not this agent's approval of this "
        "request (its service, method, path, query and body): nothing was sent."
    )


class TooManyPending(ProblemError):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_pending"
    default_detail = (
        "This agent has the most pending approvals and access requests allowed; wait for a "
        "member to decide them, or for them to expire."
    )
    # A decision or an expiry frees room; a minute is a polite wait before asking again.
    RETRY_SECONDS = 60

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": str(self.RETRY_SECONDS)})


class ApprovalNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "approval_not_found"
    default_detail = "The account has no approval or access request with this id."


class ApprovalDecided(ProblemError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "approval_decided"
    default_detail = "This approval was decided already (or expired): a decision is final."


class WebhookNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "webhook_not_found"
    default_detail = "The account has no webhook endpoint with this id."


class WebhookEventNotFound(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "webhook_event_not_found"
    default_detail = "The account has no delivered or pending event with this id."


class WebhookLimitReached(ProblemError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "webhook_limit_reached"
    default_detail = "The account has reached its limit of 10 webhook endpoints."


class InvalidWebhookUrl(ProblemError):
    """A webhook URL that is not `https`, names no host, or reaches a non-public address
    (unless CREDVAULT_WEBHOOK_ALLOWED_HOSTS names its host): 400 naming `url`."""

    default_code = "invalid_webhook_url"
    default_detail = "The webhook URL is not an https URL of a public host."

    def __init__(self, message: str) -> None:
        super().__init__(errors=[field_error("url", FieldErrorCode.INVALID, message)])


class UnknownEventType(ProblemError):
    default_code = "unknown_event_type"
    default_detail = "The events list names a type credvault does not send."

    def __init__(self, type_: str) -> None:
        message = f"{type_[:64]!r} is not an event type"
        super().__init__(errors=[field_error("events", FieldErrorCode.INVALID, message)])


class KeyManagerUnavailable(ProblemError):
    """The key manager did not unwrap a data key that is not cached (it is unreachable, or
    refused): nothing was read or written."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "key_manager_unavailable"
    default_detail = (
        "The key manager cannot be reached, so the values could not be sealed or opened; "
        "nothing was changed. Try again shortly."
    )
