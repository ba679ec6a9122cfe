"""The MCP server: `POST /mcp` with an agent token, and the RFC 9728 document of that resource.

A thin view: the Origin checked (a browser page of another origin never reaches the tools),
the agent token read as the proxy reads it, the proxy's rate per token, a body of at most 1 MiB;
then one call to `services.mcp.protocol.answer`, rendered as `application/json`. A missing or
refused token is 401 with `WWW-Authenticate: Bearer realm="credvault", resource_metadata=...`
naming the document, so that an MCP client finds what the resource is; an account token is 403
`insufficient_scope`; a GET (the handshake era's event stream) is 405: there is no server-held
session or stream.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request

from services import audit
from services.api.authentication import AgentTokenAuthentication
from services.api.base import AuditedAPIView
from services.api.context import ApiRequest
from services.api.errors import safe_methods_only
from services.api.parsing import body_at_most
from services.api.throttling import ProxyRateThrottle
from services.api.wsgi import MCP_PATH, PROXY_PATH_PREFIX
from services.audit import Operation
from services.exceptions import Forbidden
from services.mcp import protocol
from services.mcp.tools import VIA

METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"


def public_url() -> str:
    return settings.CREDVAULT_PUBLIC_URL.rstrip("/")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def challenge(*, refused: bool) -> str:
    """The 401's challenge: the realm and the resource's metadata document (RFC 9728)."""
    value = f'Bearer realm="credvault", resource_metadata="{public_url()}{METADATA_PATH}"'
    return value + (', error="invalid_token"' if refused else "")


@extend_schema(exclude=True)  # JSON-RPC, not REST: docs/mcp.md is its reference
class McpView(AuditedAPIView):
    """`POST /mcp`: one JSON-RPC message of an agent."""

    authentication_classes = [AgentTokenAuthentication]
    throttle_classes = [ProxyRateThrottle]
    http_method_names = ["post"]
    operations = {"post": Operation.PROXY_CALL}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        origin = request.META.get("HTTP_ORIGIN")
        if (
            request.method == "POST"
            and origin is not None
            and origin.lower() != _origin(public_url())
        ):
            raise Forbidden("The Origin is not credvault's own.")
        super().initial(request, *args, **kwargs)

    def post(self, request: ApiRequest) -> HttpResponseBase:
        body = body_at_most(request)
        headers = {
            key[5:].replace("_", "-").lower(): value
            for key, value in request.META.items()
            if key.startswith("HTTP_MCP_")
        }
        reply = protocol.answer(
            actor=request.context.actor,
            body=body,
            headers=headers,
            proxy_base=public_url() + PROXY_PATH_PREFIX,
        )
        if reply.message is None:
            return HttpResponse(status=reply.status)
        return HttpResponse(
            json.dumps(reply.message, separators=(",", ":")),
            status=reply.status,
            content_type="application/json",
        )

    # As AuditedAPIView's: DRF returns what EXCEPTION_HANDLER gives; the stubs say Response.
    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]
        response = super().handle_exception(exc)
        if response.status_code == 401:
            refused = self.request.META.get("HTTP_AUTHORIZATION") is not None
            response["WWW-Authenticate"] = challenge(refused=refused)
        if response.status_code == 405:
            response["Allow"] = "POST"
        return response

    def _audit_refusal(self, request: ApiRequest, status: int) -> None:
        context = request.context
        if context.principal is None or request.method != "POST":
            return
        audit.record_refusal(context.actor, Operation.PROXY_CALL, status=status, via=VIA)


@safe_methods_only
def protected_resource(request: HttpRequest) -> HttpResponse:
    """The RFC 9728 document of `/mcp`: what the resource is and how its token is sent. No
    authorization server: the agent token is issued by its account (docs/mcp.md)."""
    document = {
        "resource": public_url() + MCP_PATH,
        "resource_name": "credvault",
        "bearer_methods_supported": ["header"],
    }
    return HttpResponse(json.dumps(document), content_type="application/json")
