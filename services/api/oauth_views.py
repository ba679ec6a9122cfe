"""OAuth clients, the connect endpoint (account API), and the two pages a person's browser
sees: the start page the connect's link opens, and the callback page the provider sends it
back to. Thin views: read input, call one function, render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response

from services.api.base import AccountAPIView
from services.api.context import ApiRequest
from services.api.parsing import read_connect_options, read_oauth_client
from services.api.rendering import render, render_many
from services.api.schema import (
    CONNECT_EXAMPLES,
    OAUTH_CLIENT_EXAMPLES,
    path_identifier,
)
from services.api.serializers import (
    ConnectInputSerializer,
    ConnectSerializer,
    OAuthClientInputSerializer,
    OAuthClientSerializer,
)
from services.audit import Operation
from services.oauth.clients import delete_client, list_clients, put_client
from services.oauth.connect import (
    ConnectFailed,
    StartRefused,
    continue_connect,
    cookie_name,
    finish_connect,
    start_connect,
    start_page,
)

PROVIDER_PARAMETER = path_identifier("provider", "A catalog provider with OAuth.", "github")
# The pages: no script, no frame, nothing loaded from anywhere; their one style inline.
CALLBACK_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
# The start page's one form posts to the page itself, which sends the browser on to the
# provider's authorization URL: browsers hold a form's redirects to `form-action` too, so the
# provider's origin is named, and nothing else.
START_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
    "form-action 'self' {provider}; frame-ancestors 'none'"
)


class OAuthClientListView(AccountAPIView):
    http_method_names = ["get", "head"]
    operations = {"get": Operation.LIST_OAUTH_CLIENTS}

    @extend_schema(
        operation_id="list_oauth_clients",
        summary="List the account's OAuth clients",
        tags=["oauth"],
        responses={200: OAuthClientSerializer(many=True)},
    )
    def get(self, request: ApiRequest) -> Response:
        clients = list_clients(actor=request.context.actor)
        return Response(render_many(OAuthClientSerializer, clients))


class OAuthClientView(AccountAPIView):
    http_method_names = ["put", "delete"]
    operations = {"put": Operation.CREATE_OAUTH_CLIENT, "delete": Operation.DELETE_OAUTH_CLIENT}

    @extend_schema(
        operation_id="put_oauth_client",
        summary="Store or replace the account's OAuth client of a provider",
        tags=["oauth"],
        parameters=[PROVIDER_PARAMETER],
        request=OAuthClientInputSerializer,
        examples=OAUTH_CLIENT_EXAMPLES,
        responses={
            200: OpenApiResponse(OAuthClientSerializer, description="Replaced."),
            201: OpenApiResponse(OAuthClientSerializer, description="Stored."),
        },
    )
    def put(self, request: ApiRequest, provider: str) -> Response:
        client_id, client_secret = read_oauth_client(request)
        client, status = put_client(
            actor=request.context.actor,
            provider=provider,
            client_id=client_id,
            client_secret=client_secret,
        )
        return Response(render(OAuthClientSerializer, client), status=status)

    @extend_schema(
        operation_id="delete_oauth_client",
        summary="Remove the account's OAuth client of a provider",
        tags=["oauth"],
        parameters=[PROVIDER_PARAMETER],
        responses={204: OpenApiResponse(description="Removed.")},
    )
    def delete(self, request: ApiRequest, provider: str) -> Response:
        delete_client(actor=request.context.actor, provider=provider)
        return Response(status=204)


class ConnectView(AccountAPIView):
    http_method_names = ["post"]
    operations = {"post": Operation.START_CONNECT}

    @extend_schema(
        operation_id="connect",
        summary="Start connecting a provider by OAuth in a browser",
        tags=["oauth"],
        description=(
            "Answers the URL to send the person's browser to: credvault's own start page, "
            "`{CREDVAULT_PUBLIC_URL}/oauth/start/{id}`, which names the provider and the "
            "account and asks the person to continue; continuing binds the connect to that "
            "browser and sends it to the provider. The link is continued once and expires in "
            "10 minutes; the provider then sends the browser to "
            "`{CREDVAULT_PUBLIC_URL}/oauth/callback`, which stores the set."
        ),
        parameters=[PROVIDER_PARAMETER],
        request=ConnectInputSerializer,
        examples=CONNECT_EXAMPLES,
        responses={201: ConnectSerializer},
    )
    def post(self, request: ApiRequest, provider: str) -> Response:
        scopes, service = read_connect_options(request)
        connect = start_connect(
            actor=request.context.actor, provider=provider, scopes=scopes, service=service
        )
        return Response(render(ConnectSerializer, connect), status=201)


# Why a callback connected nothing, as the page tells the person (its status is the failure's,
# services/oauth/connect.py's CONNECT_FAILURES). `{provider}` is the provider's name, `{code}`
# its error code (a short printable code), `{field}` and `{rule}` the API host field and the
# rule it broke.
CALLBACK_FAILURES: dict[str, str] = {
    "no_state": "The link has no state: start the connection again.",
    "unknown_state": "This connection link is unknown or was used already.",
    "other_browser": (
        "This browser did not continue this connection (it was continued in another browser, "
        "or its cookies are off): start the connection again and finish it in one browser."
    ),
    "expired": "This connection link has expired: start the connection again.",
    "provider_error": "{provider} did not connect: {code}.",
    "no_code": "{provider} sent no authorization code.",
    "no_client": "The account's OAuth client was removed during the connection.",
    "unavailable": "{provider} could not be reached.",
    "misconfigured": (
        "The OAuth client is misconfigured: {provider} refused its client ID or secret "
        "({code}). Correct the account's OAuth client, then connect again. Nothing was stored."
    ),
    "refused": "{provider} refused the authorization code.",
    "api_host_refused": (
        "{provider} named an API host ({field}) that is not {rule}. Nothing was stored."
    ),
}


def failure_page(failed: ConnectFailed) -> tuple[dict, int]:
    reason = CALLBACK_FAILURES[failed.why].format(
        provider=failed.provider, code=failed.code, field=failed.field, rule=failed.rule
    )
    return {"connected": False, "reason": reason}, failed.status


# Why the start page shows no connect, or a continue was refused: its status and sentence.
START_FAILURES: dict[str, tuple[int, str]] = {
    "unknown": (
        400,
        "This connection link is unknown or was used already: start the connection again.",
    ),
    "used": (400, "This connection link was used already: start the connection again."),
    "expired": (400, "This connection link has expired: start the connection again."),
    "other_site": (
        403,
        "A connection continues only from its own page: open the connection link again and "
        "continue there.",
    ),
    "no_client": (409, "The account's OAuth client of {provider} was removed meanwhile."),
}


@csrf_exempt  # the continue's own check: continue_connect refuses another site's submission
@require_http_methods(["GET", "HEAD", "POST"])
def start(request: HttpRequest, start_id: str) -> HttpResponse:
    """The page a connect's link opens: who asks to connect what, and a button to continue
    (POST, to the page itself), which binds the connect to this browser with a cookie and
    sends it to the provider. Never a value; never cached; nothing loaded."""
    try:
        if request.method == "POST":
            continued = continue_connect(
                start_id=start_id,
                fetch_site=request.headers.get("Sec-Fetch-Site", ""),
                origin=request.headers.get("Origin", ""),
                request_id=request.context.request_id,  # type: ignore[attr-defined]
            )
        else:
            page = start_page(start_id=start_id)
    except StartRefused as refused:
        status, sentence = START_FAILURES[refused.why]
        context = {"refused": True, "reason": sentence.format(provider=refused.provider)}
        return _page("oauth/start.html", context, status, policy=CALLBACK_POLICY)
    if request.method == "POST":
        response = HttpResponse(status=303)
        response["Location"] = continued.authorize_url
        response["Referrer-Policy"] = "no-referrer"
        response.set_cookie(
            continued.cookie_name,
            continued.cookie_value,
            max_age=continued.max_age,
            path="/",
            secure=continued.secure,
            httponly=True,
            samesite="Lax",
        )
        return response
    context = {
        "refused": False,
        "provider": page.provider_name,
        "account": page.account_name,
        "service": page.service,
        "scopes": page.scopes,
        "expires_at": page.expires_at.strftime("%H:%M UTC"),
    }
    policy = START_POLICY.format(provider=page.provider_origin).replace(" ;", ";")
    return _page("oauth/start.html", context, 200, policy=policy, referrer="same-origin")


@require_GET  # not HEAD: the state is used up by the first request that brings it
def callback(request: HttpRequest) -> HttpResponse:
    """The page the provider sends the person's browser to: which service is now connected,
    or why not. Never a value; never cached; nothing loaded."""
    state = request.GET.get("state", "")
    try:
        connected = finish_connect(
            state=state,
            code=request.GET.get("code", ""),
            error=request.GET.get("error", ""),
            cookies=request.COOKIES,
            request_id=request.context.request_id,  # type: ignore[attr-defined]
        )
    except ConnectFailed as failed:
        context, status = failure_page(failed)
    else:
        context = {
            "connected": True,
            "provider": connected.provider_name,
            "service": connected.service,
        }
        status = 200
    response = _page("oauth/callback.html", context, status, policy=CALLBACK_POLICY)
    if state:
        response.delete_cookie(cookie_name(state), path="/", samesite="Lax")
    return response


def _page(
    template: str, context: dict, status: int, *, policy: str, referrer: str = "no-referrer"
) -> HttpResponse:
    response = HttpResponse(render_to_string(template, context), status=status)
    response["Cache-Control"] = "no-store"
    response["Content-Security-Policy"] = policy
    response["Referrer-Policy"] = referrer
    return response
