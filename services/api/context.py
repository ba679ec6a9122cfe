"""What credvault knows of an API request beyond Django's: its id, who sent it, what it is about.

`RequestContextMiddleware` gives every request a `RequestContext` as `request.context`;
authentication fills in the principal, and a view the service or agent the request is about,
so that a refused or failed request is audited with them (`base.AuditedAPIView`). `ApiRequest`
declares what a view may read; it is a type for annotations, never instantiated.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from django.http import HttpRequest
from rest_framework.request import Request

from services.audit import Actor
from services.models import REQUEST_ID_MAX_LENGTH

_REQUEST_ID = re.compile(rf"[A-Za-z0-9._-]{{1,{REQUEST_ID_MAX_LENGTH}}}")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a bearer token speaks for: its account and, for an agent token, its agent. Never
    holds the token."""

    kind: str  # storage.queries.ACCOUNT_TOKEN or AGENT_TOKEN
    token_id: int
    token_prefix: str
    account_id: int
    account_name: str
    agent_id: int | None = None
    agent_name: str = ""

    @property
    def is_authenticated(self) -> bool:
        """The REST framework's IsAuthenticated asks."""
        return True

    def actor(self, request_id: str) -> Actor:
        return Actor(
            account_id=self.account_id,
            token_prefix=self.token_prefix,
            request_id=request_id,
            agent_id=self.agent_id,
            agent_name=self.agent_name,
        )


@dataclass(slots=True)
class RequestContext:
    request_id: str
    # The principal of a known token: set when the token is accepted, and also when it is
    # refused as revoked or expired, so that its account learns of the attempt.
    principal: Principal | None = None
    # Whether the token was accepted (the access log shows only an accepted token's prefix).
    authenticated: bool = False
    # What the request is about, for its audit event: a service, or an agent (`target`).
    service: str = ""
    target: str = ""
    # A brokered call's method and path as sent, for the event of its refusal.
    method: str = ""
    path: str = ""
    # The headers that carried an agent token (lower case): never sent on to a provider.
    token_headers: frozenset[str] = frozenset()

    @classmethod
    def for_request(cls, request: HttpRequest) -> RequestContext:
        """The caller's X-Request-ID when it is a plain token, else a new one."""
        given = request.META.get("HTTP_X_REQUEST_ID", "")
        return cls(request_id=given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex)

    @property
    def actor(self) -> Actor:
        """The actor of an authenticated request."""
        if self.principal is None:
            raise RuntimeError("the request has no principal")
        return self.principal.actor(self.request_id)


class ContextRequest(HttpRequest):
    """A request as RequestContextMiddleware leaves it (for annotations only)."""

    context: RequestContext


class ApiRequest(Request):
    """An API view's request, as authentication leaves it (for annotations only)."""

    # DRF's user is what authentication returned; the stubs name Django's User only.
    user: Principal  # type: ignore[assignment]
    context: RequestContext
