"""The brokered call: `{METHOD} /api/v1/agent/proxy/{service}/{path}` with an
agent token (`{service}~{base}/{path}` for another base of the service,
`{service}~host/{host}/{path}` for a host of its host pattern). A thin view: the agent's
request as it came (the path still percent-encoded, the query untouched, the headers, the
body), one call to `services.broker.call.call`, and the provider's answer rendered as it is."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any, cast
from urllib.parse import quote, unquote, urlsplit

from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from providers.http.client import BODILESS_METHODS
from providers.identifiers import split_base
from services.api.authentication import AgentTokenAuthentication, path_token
from services.api.base import AuditedAPIView
from services.api.context import ApiRequest
from services.api.parsing import body_at_most
from services.api.schema import path_identifier
from services.api.throttling import ProxyRateThrottle
from services.api.wsgi import PROXY_PATH_PREFIX
from services.audit import Operation
from services.broker.answers import ProxyAnswer
from services.broker.call import ProxyRequest, call
from services.broker.destination import Base, named_base
from services.broker.headers import canonical
from services.broker.paths import MAX_PATH_LENGTH
from services.broker.tokens import without_tokens
from services.exceptions import (
    InvalidIdentifier,
    InvalidProxyPath,
    InvalidProxyRequest,
    PathNotFound,
)
from services.identifiers import service_identifier

METHODS = ("get", "head", "post", "put", "patch", "delete")


def raw_path(request: ApiRequest, service: str) -> str:
    """The path after the service, as the agent sent it (still percent-encoded): `""` or
    `/...`, less the segment that carried the agent token for a service whose credential goes
    in the path (`/bot<token>/getMe` is `/getMe`: the credential goes in its place). gunicorn
    hands on the request target as it came (RAW_URI); elsewhere (Django's test client) the
    decoded path is encoded again. A target whose proxy prefix is itself percent-encoded
    (`/api/v1/agent/%70roxy/...`) is no brokered call: 404, nothing sent."""
    raw = request.META.get("RAW_URI")
    target = urlsplit(raw).path if raw else quote(request.path, safe="/")
    if not target.startswith(PROXY_PATH_PREFIX):
        raise PathNotFound()
    service_raw, separator, rest = target[len(PROXY_PATH_PREFIX) :].partition("/")
    if unquote(service_raw) != service:
        raise InvalidProxyPath()  # an encoded '/' in the service's segment
    path = separator + rest
    carried = path_token(service, path)
    return carried[1] if carried is not None else path


def proxy_target(request: ApiRequest, segment: str) -> tuple[str, Base, str]:
    """The service (normalized), the base and the path below it that the proxy URL names:
    `segment` is the service's segment of the path (`huggingface~router`), decoded."""
    service, base = split_base(segment)
    chosen, path = named_base(base, raw_path(request, segment))
    return service_identifier(service), chosen, path


def agent_headers(request: ApiRequest) -> dict[str, str]:
    """The agent's headers (lower-case names, as the WSGI environment gives them: `_` is `-`),
    less those that carried its token. They obey the broker's rule set for headers
    (services/broker/headers.py) as call_api's do."""
    carriers = {canonical(name) for name in request.context.token_headers}
    headers = {
        name: value
        for key, value in request.META.items()
        if key.startswith("HTTP_") and (name := canonical(key[5:])) not in carriers
    }
    if request.META.get("CONTENT_TYPE"):
        headers["content-type"] = request.META["CONTENT_TYPE"]
    return headers


def proxy_body(request: ApiRequest) -> bytes:
    """The body sent on (the broker checks its limit; a longer one than the server reads is
    413 unread), and none on GET, HEAD or OPTIONS, whose requests carry no body: a provider
    that does not read one takes it for the start of the next request on the connection."""
    body = body_at_most(request)
    if body and request.method in BODILESS_METHODS:
        raise InvalidProxyRequest()
    return body


def render(answer: ProxyAnswer) -> HttpResponseBase:
    """The provider's answer: whole, or streamed as it arrives. Marked as the provider's
    (`passed_on`), so that its own X-Request-ID stays (services/api/middleware.py)."""
    if answer.stream is not None:
        response: HttpResponseBase = ProviderStream(answer.stream, status=answer.status)
        # nginx (deploy/nginx.conf) passes this answer on as it comes, not once whole.
        response["X-Accel-Buffering"] = "no"
    else:
        response = ProviderAnswer(answer.body, status=answer.status)
    del response["Content-Type"]  # the provider's own, if it sent one
    merged: dict[str, list[str]] = {}
    for name, value in answer.headers:
        merged.setdefault(name, []).append(value)
    for name, values in merged.items():
        response[name] = ", ".join(values)
    if answer.stream is None and not response.has_header("Content-Length"):
        response["Content-Length"] = str(len(answer.body))  # a HEAD answer keeps the provider's
    return response


class ProviderAnswer(HttpResponse):
    """The provider's answer, whole: `passed_on` tells the middleware it is not credvault's."""

    passed_on = True


class ProviderStream(StreamingHttpResponse):
    """The provider's answer, streamed as it arrives (`passed_on` as ProviderAnswer's)."""

    passed_on = True


def _documented(method: str):
    """The document's operation of one method: `agent_proxy_get`, `agent_proxy_post`, ..."""
    return extend_schema(
        operation_id=f"agent_proxy_{method}",
        summary="Call a granted service's provider through credvault (agent token)",
        tags=["agent"],
        description="credvault adds the stored credential and passes back the provider's "
        "status, headers (less Set-Cookie, hop-by-hop, X-Credvault-* and X-Accel-*) and body, "
        "every injected value "
        "replaced by [REDACTED]. 400 invalid_proxy_path, invalid_proxy_request (a body on "
        "GET or HEAD, a header name that is no token or a value with a control character), or "
        "agent_token_in_request (a cva_ or cvt_ token outside the places the agent token is "
        "read from); 403 not_granted (no grant, or the base, "
        "method or path outside it); 404 service_not_connected; 409 not_proxyable (no API "
        "address or credential placement for the service); 413 over "
        "CREDVAULT_PROXY_MAX_BODY; 502 upstream_unavailable, upstream_too_large or "
        "upstream_bad_answer (a malformed answer: a Transfer-Encoding other than chunked, a "
        "header with a control character); 504 upstream_timeout.",
        request=None,
        responses={
            (200, "*/*"): OpenApiResponse(
                description="The provider's answer, whatever its status."
            ),
        },
        parameters=[
            path_identifier(
                "service",
                "A granted service; `{service}~{base}` for another base of a provider with "
                "more than one host (`huggingface~router`), `{service}~host` for a host of its "
                "host pattern, which is then the path's first segment (a DNS name the pattern "
                "matches; else 400 invalid_proxy_path, as for a base the catalog does not give "
                "the service). The part before `~`:",
                "github",
            ),
            OpenApiParameter(
                "path",
                str,
                OpenApiParameter.PATH,
                description="The provider's path below its API base (or the named base; after "
                "`~host`, the host, then the path below it); may be empty.",
                allow_blank=True,
            ),
        ],
    )


class ProxyView(AuditedAPIView):
    """The agent API's brokered call: agent tokens only, its own rate per token."""

    authentication_classes = [AgentTokenAuthentication]
    # The agent token may come in the header of the service's credential placement.
    reads_placement_headers = True
    throttle_classes = [ProxyRateThrottle]
    http_method_names = list(METHODS)
    operations = dict.fromkeys(METHODS, Operation.PROXY_CALL)
    problems = (409, 413, 502, 504)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # The method and path go into the event of every refusal, a revoked token's included.
        api_request = cast(ApiRequest, request)
        context = api_request.context
        context.method = request.method or ""
        # The service of a segment that names a base too (`huggingface~router`), which the
        # base class's reading of the path does not split.
        with contextlib.suppress(InvalidIdentifier):
            context.service = service_identifier(split_base(kwargs["service"])[0])
        try:
            _, base, path = proxy_target(api_request, kwargs["service"])
            context.path = without_tokens(base.spelling + (path or "/"))[:MAX_PATH_LENGTH]
        except (InvalidProxyPath, InvalidIdentifier):
            context.path = "/"
        super().initial(request, *args, **kwargs)

    # DRF passes on any HttpResponseBase (it asserts no more); the stubs say Response.
    def finalize_response(  # type: ignore[override]
        self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        """The provider's answer leaves with the provider's headers only: the REST framework
        would add the view's own method list as `Allow`, over the provider's."""
        if getattr(response, "passed_on", False):
            return response
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[arg-type]

    def proxy(self, request: ApiRequest, service: str) -> HttpResponseBase:
        normalized, base, path = proxy_target(request, service)
        proxied = ProxyRequest(
            method=request.method or "",
            raw_path=path,
            query=request.META.get("QUERY_STRING", ""),
            headers=agent_headers(request),
            body=proxy_body(request),
            proxy_url=partial(
                request.build_absolute_uri, PROXY_PATH_PREFIX + normalized + base.spelling
            ),
            base=base,
        )
        return render(call(actor=request.context.actor, service=normalized, request=proxied))


def _handler(method: str):
    """The view's handler of one method: each its own function, so that each is its own
    operation in the document."""

    def handle(self: ProxyView, request: ApiRequest, service: str, path: str) -> HttpResponseBase:
        return self.proxy(request, service)

    handle.__name__ = handle.__qualname__ = method
    return handle if method == "head" else _documented(method)(handle)


for _method in METHODS:
    setattr(ProxyView, _method, _handler(_method))
