"""Domain errors: each carries its HTTP status and problem code, and is rendered as RFC 9457
problem details in one place (`services/api/errors.py`). Messages never hold a value."""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import APIException

from services.identifiers import SERVICE_RULE

# The RFC 6750 challenge of every 401 and scope refusal.
REALM = 'Bearer realm="credvault"'


class ProblemError(APIException):
    """An error with a status, a problem code, a detail, and optionally field errors."""

    status_code = status.HTTP_400_BAD_REQUEST
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


def field_error(field: str, code: str, message: str) -> dict[str, str]:
    return {"field": field, "code": code, "message": message}


class MalformedJSON(ProblemError):
    default_code = "malformed_json"
    default_detail = "The body is not strict JSON."


class InvalidRequest(ProblemError):
    default_code = "invalid_request"
    default_detail = "The body does not have the expected shape; see errors."


class InvalidService(ProblemError):
    default_code = "invalid_service"
    default_detail = "The service identifier is not valid."

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(
            detail,
            errors=[field_error("service", "invalid", SERVICE_RULE)],
        )


class ServiceNotConnected(ProblemError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "service_not_connected"
    default_detail = "No credentials are stored for this service."


class NotGranted(ProblemError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "not_granted"
    default_detail = "This agent has no grant for the service."


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


class ServiceLimitReached(ProblemError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "service_limit_reached"
    default_detail = "The account has reached its limit of connected services."


class VerificationFailed(ProblemError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "verification_failed"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The provider did not accept the credentials ({reason}); nothing was stored and "
            "any earlier set is unchanged.",
            extra={"reason": reason},
        )


class PayloadTooLarge(ProblemError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"
    default_detail = "The body is larger than 64 KiB."


class UnsupportedMediaType(ProblemError):
    status_code = status.HTTP_415_UNSUPPORTED_MEDIA_TYPE
    default_code = "unsupported_media_type"
    default_detail = "The body must be sent as Content-Type: application/json in UTF-8."


class ServiceUnavailable(ProblemError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "service_unavailable"
    default_detail = "The database cannot be reached. Try again shortly."
