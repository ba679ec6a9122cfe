"""Connecting a provider in a browser: the link, and the callback that stores the set.

A connect's state is random, single-use (its row is deleted as it is used), bound to the
account, the provider and the service, and expires in STATE_SECONDS. Only its SHA-256 digest
is stored; the PKCE verifier is derived from the state and SECRET_KEY, so it is stored nowhere.
The callback checks the state before anything is sent, then exchanges the code and stores the
set as one store; nothing is stored on failure.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from providers import catalog
from providers import oauth as provider_oauth
from services import audit, credentials
from services.audit import BROWSER_ACTOR, Actor, Operation
from services.exceptions import OAuthClientNotFound
from services.models import ConnectedService, OAuthState
from services.oauth.clients import client_of, oauth_provider
from services.oauth.token_sets import token_set
from services.storage.transactions import account_transaction

STATE_SECONDS = 600
CALLBACK_PATH = "/oauth/callback"


@dataclass(frozen=True)
class Connect:
    authorize_url: str
    expires_at: datetime


def redirect_uri() -> str:
    return settings.CREDVAULT_PUBLIC_URL.rstrip("/") + CALLBACK_PATH


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _verifier(state: str) -> str:
    """The PKCE verifier of a state (43 characters of base64url, RFC 7636)."""
    mac = hmac.new(settings.SECRET_KEY.encode(), f"pkce:{state}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")


def start_connect(
    *, actor: Actor, provider: str, scopes: list[str] | None, service: str | None
) -> Connect:
    """A new connect: the URL to send the person's browser to, and when it stops working."""
    found = oauth_provider(provider)
    client = client_of(account_id=actor.account_id, provider=provider)
    if client is None:
        raise OAuthClientNotFound()
    target = credentials.service_identifier(service) if service else provider
    chosen = tuple(scopes) if scopes is not None else found.oauth.scopes  # type: ignore[union-attr]
    state = secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(seconds=STATE_SECONDS)
    with account_transaction(actor.account_id):
        OAuthState.objects.filter(expires_at__lte=timezone.now()).delete()
        OAuthState.objects.create(
            digest=_digest(state),
            account_id=actor.account_id,
            provider=provider,
            service=target,
            scopes=list(chosen),
            expires_at=expires_at,
        )
        audit.record(actor, Operation.START_CONNECT, service=target)
    url = provider_oauth.authorize_url(
        found,
        client_id=client.client_id,
        redirect_uri=redirect_uri(),
        state=state,
        verifier=_verifier(state),
        scopes=chosen,
    )
    return Connect(url, expires_at)


class ConnectFailed(Exception):
    """Why a callback connected nothing: `why` (one of WHY), the provider's name where it is
    known, the provider's error code (printable: a short code, nothing else) and, for a refused
    API host, the field and the rule it broke. Never a value. The page that tells the person
    is the view's (services/api/oauth_views.py)."""

    WHY = (
        "no_state",
        "unknown_state",
        "expired",
        "provider_error",
        "no_code",
        "no_client",
        "unavailable",
        "misconfigured",
        "refused",
        "api_host_refused",
    )

    def __init__(
        self, why: str, *, provider: str = "", code: str = "", field: str = "", rule: str = ""
    ) -> None:
        super().__init__(why)
        self.why = why
        self.provider = provider
        self.code = code
        self.field = field
        self.rule = rule


@dataclass(frozen=True)
class Connected:
    provider_name: str
    service: str


def finish_connect(*, state: str, code: str, error: str, request_id: str) -> Connected:
    """The callback: the state checked and used up before anything is sent, then the code
    exchanged and the set stored. Raises ConnectFailed; nothing is stored on failure."""
    if not state:
        raise ConnectFailed("no_state")
    row = OAuthState.objects.filter(digest=_digest(state)).first()
    # Single-use whatever follows: of two callbacks with one state, one deletes it.
    if row is None or not OAuthState.objects.filter(pk=row.pk).delete()[0]:
        raise ConnectFailed("unknown_state")
    actor = Actor(account_id=row.account_id, token_prefix=BROWSER_ACTOR, request_id=request_id)
    provider = catalog.get(row.provider)
    if row.expires_at <= timezone.now() or provider is None or provider.oauth is None:
        _failed(actor, row.service, 400, "expired")
        raise ConnectFailed("expired")
    name = provider.name
    if error:
        _failed(actor, row.service, 400, "provider_error")
        raise ConnectFailed("provider_error", provider=name, code=printable(error))
    if not code:
        _failed(actor, row.service, 400, "no_code")
        raise ConnectFailed("no_code", provider=name)
    client = client_of(account_id=row.account_id, provider=row.provider)
    if client is None:
        _failed(actor, row.service, 409, "no_client")
        raise ConnectFailed("no_client", provider=name)
    try:
        answer = provider_oauth.exchange_code(
            provider,
            client=client,
            code=code,
            verifier=_verifier(state),
            redirect_uri=redirect_uri(),
        )
    except provider_oauth.Unavailable:
        _failed(actor, row.service, 503, "unavailable")
        raise ConnectFailed("unavailable", provider=name) from None
    except provider_oauth.Misconfigured as exc:
        _failed(actor, row.service, 409, exc.code)
        raise ConnectFailed("misconfigured", provider=name, code=printable(exc.code)) from None
    except provider_oauth.TokenError as exc:
        _failed(actor, row.service, 400, exc.code or "refused")
        raise ConnectFailed("refused", provider=name) from None
    api_host = provider.api_host
    if api_host and answer.api_host is not None and not api_host.base_url(answer.api_host):
        _failed(actor, row.service, 400, "api_host_refused")
        raise ConnectFailed(
            "api_host_refused", provider=name, field=api_host.field, rule=api_host.rule
        )
    fields = token_set(answer, previous_refresh=None, scopes=tuple(row.scopes), provider=provider)
    credential_set = credentials.credential_set(service=row.service, fields=fields)
    with transaction.atomic():
        stored = credentials.store_credentials(actor=actor, credentials=credential_set)
        ConnectedService.objects.filter(account_id=row.account_id, service=row.service).update(
            oauth_provider=row.provider
        )
    audit.record(actor, Operation.FINISH_CONNECT, status=stored.event.status, service=row.service)
    return Connected(provider.name, row.service)


def _failed(actor: Actor, service: str, status: int, why: str) -> None:
    audit.record(actor, Operation.FINISH_CONNECT, status=status, service=service, target=why)


def printable(text: str) -> str:
    """A provider's error code as a page may show it: a short code, nothing else."""
    kept = "".join(c for c in text[:64] if c.isascii() and (c.isalnum() or c in "_-."))
    return kept or "an error"
