"""Connecting a provider in a browser: the start page, its continue, and the callback that
stores the set. How the link, the state and the browser's cookie hold: docs/oauth.md."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

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
START_PATH = "/oauth/start/"
# The cookie that binds a connect to the browser that continued it: one per connect (named for
# its state), so that two connects under way in one browser do not undo each other.
COOKIE_PREFIX = "credvault_connect_"


@dataclass(frozen=True)
class Connect:
    """A connect started: the link to send the person's browser to (the start page), and
    when it stops working."""

    authorize_url: str
    expires_at: datetime


def redirect_uri() -> str:
    return settings.CREDVAULT_PUBLIC_URL.rstrip("/") + CALLBACK_PATH


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _derived(purpose: str, text: str) -> str:
    """43 characters of base64url: an HMAC of `text` under SECRET_KEY, for one purpose."""
    mac = hmac.new(settings.SECRET_KEY.encode(), f"{purpose}:{text}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")


def _verifier(state: str) -> str:
    """The PKCE verifier of a state (43 characters of base64url, RFC 7636)."""
    return _derived("pkce", state)


def _state_of(start_id: str) -> str:
    """The state of the connect whose start page is `start_id`: unguessable without
    SECRET_KEY, so the start link never holds it."""
    return _derived("state", start_id)


def _secure() -> bool:
    return urlsplit(settings.CREDVAULT_PUBLIC_URL).scheme == "https"


def cookie_name(state: str) -> str:
    """The name of the cookie that binds the connect of `state` to a browser. Over https it
    has the `__Host-` prefix: Secure, for this host only, so that no other host of the
    domain can set it."""
    prefix = "__Host-" if _secure() else ""
    return f"{prefix}{COOKIE_PREFIX}{_digest(state)[:16]}"


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
    start_id = secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(seconds=STATE_SECONDS)
    with account_transaction(actor.account_id):
        OAuthState.objects.filter(expires_at__lte=timezone.now()).delete()
        OAuthState.objects.create(
            start_digest=_digest(start_id),
            digest=_digest(_state_of(start_id)),
            account_id=actor.account_id,
            provider=provider,
            service=target,
            scopes=list(chosen),
            expires_at=expires_at,
        )
        audit.record(actor, Operation.START_CONNECT, service=target)
    link = settings.CREDVAULT_PUBLIC_URL.rstrip("/") + START_PATH + start_id
    return Connect(link, expires_at)


class StartRefused(Exception):
    """Why the start page shows no connect, or a continue was refused: `why` (a key of the
    view's START_FAILURES), and the provider's name where it is known."""

    def __init__(self, why: str, *, provider: str = "") -> None:
        super().__init__(why)
        self.why = why
        self.provider = provider


@dataclass(frozen=True)
class StartPage:
    """What the start page says: who asks to connect what, as which service, until when; and
    the origin of the provider's authorization URL, where continuing sends the browser."""

    provider_name: str
    account_name: str
    service: str
    scopes: tuple[str, ...]
    expires_at: datetime
    provider_origin: str


@dataclass(frozen=True)
class Continued:
    """A continue: where the browser goes now (the provider, with the state), and the cookie
    that binds the connect to it (a random nonce; the row holds its digest)."""

    authorize_url: str
    cookie_name: str
    cookie_value: str
    max_age: int
    secure: bool


def start_page(*, start_id: str) -> StartPage:
    """The connect whose start page is `start_id`, as the page shows it. Raises StartRefused
    for an unknown, expired or already continued one."""
    row, provider = _start_row(start_id)
    return StartPage(
        provider_name=provider.name,
        account_name=row.account.name,
        service=row.service,
        scopes=tuple(row.scopes),
        expires_at=row.expires_at,
        provider_origin=provider_oauth.authorize_origin(provider),
    )


def _start_row(start_id: str) -> tuple[OAuthState, catalog.Provider]:
    row = (
        OAuthState.objects.select_related("account").filter(start_digest=_digest(start_id)).first()
    )
    if row is None:
        raise StartRefused("unknown")
    provider = catalog.get(row.provider)
    name = provider.name if provider is not None else ""
    if row.browser_digest:
        raise StartRefused("used", provider=name)
    if row.expires_at <= timezone.now() or provider is None or provider.oauth is None:
        raise StartRefused("expired", provider=name)
    return row, provider


def from_this_site(*, fetch_site: str, origin: str) -> bool:
    """Whether a browser's form submission comes from a page of this site (so that no other
    site binds its own connect to a person's browser): `Sec-Fetch-Site` must be `same-origin`;
    where a browser sends none, its `Origin` must be CREDVAULT_PUBLIC_URL's. A submission that
    says neither is refused: every browser that posts a form says one of them."""
    if fetch_site:
        return fetch_site == "same-origin"
    public = urlsplit(settings.CREDVAULT_PUBLIC_URL)
    return bool(origin) and origin == f"{public.scheme}://{public.netloc}"


def continue_connect(*, start_id: str, fetch_site: str, origin: str, request_id: str) -> Continued:
    """The person continues from the start page: the connect is bound to this browser (once)
    and the browser sent to the provider. Raises StartRefused: unknown, expired or already
    continued; `other_site` when the submission does not come from the start page itself; the
    account's client removed meanwhile."""
    row, provider = _start_row(start_id)
    actor = Actor(account_id=row.account_id, token_prefix=BROWSER_ACTOR, request_id=request_id)
    if not from_this_site(fetch_site=fetch_site, origin=origin):
        audit.record(
            actor, Operation.START_CONNECT, status=403, service=row.service, target="other_site"
        )
        raise StartRefused("other_site", provider=provider.name)
    client = client_of(account_id=row.account_id, provider=row.provider)
    if client is None:
        raise StartRefused("no_client", provider=provider.name)
    nonce = secrets.token_urlsafe(32)
    now = timezone.now()
    with account_transaction(row.account_id):
        # Once: of two browsers continuing one link, one binds it.
        bound = OAuthState.objects.filter(pk=row.pk, browser_digest="", expires_at__gt=now).update(
            browser_digest=_digest(nonce)
        )
        if not bound:
            raise StartRefused("used", provider=provider.name)
        audit.record(
            actor, Operation.START_CONNECT, status=303, service=row.service, target="continued"
        )
    state = _state_of(start_id)
    url = provider_oauth.authorize_url(
        provider,
        client_id=client.client_id,
        redirect_uri=redirect_uri(),
        state=state,
        verifier=_verifier(state),
        scopes=tuple(row.scopes),
    )
    return Continued(
        authorize_url=url,
        cookie_name=cookie_name(state),
        cookie_value=nonce,
        max_age=max(1, int((row.expires_at - now).total_seconds())),
        secure=_secure(),
    )


# Why a callback connected nothing, and its status: the page's and the audit event's alike.
CONNECT_FAILURES: dict[str, int] = {
    "no_state": 400,
    "unknown_state": 400,
    "other_browser": 400,
    "expired": 400,
    "provider_error": 400,
    "no_code": 400,
    "no_client": 409,
    "unavailable": 502,  # the provider's token URL, not credvault, failed
    "misconfigured": 409,
    "refused": 400,
    "api_host_refused": 400,
}
# Not recorded: a missing or unknown state names no account, and of two callbacks with one
# state the one that used it records.
UNRECORDED = frozenset({"no_state", "unknown_state"})


class ConnectFailed(Exception):
    """Why a callback connected nothing: `why` (a key of CONNECT_FAILURES), the provider's
    name where known, its error code (printable), for a refused API host the field and the
    rule it broke, and `detail`, the audit event's target (`why` unless said). Never a value.
    finish_connect records it; the page that tells the person is the view's."""

    def __init__(
        self,
        why: str,
        *,
        provider: str = "",
        code: str = "",
        field: str = "",
        rule: str = "",
        detail: str = "",
    ) -> None:
        super().__init__(why)
        self.why = why
        self.status = CONNECT_FAILURES[why]
        self.provider = provider
        self.code = code
        self.field = field
        self.rule = rule
        self.detail = detail or why


@dataclass(frozen=True)
class Connected:
    provider_name: str
    service: str


def finish_connect(
    *, state: str, code: str, error: str, cookies: Mapping[str, str], request_id: str
) -> Connected:
    """The callback: the state checked (with the cookie of the browser that continued it,
    among `cookies`) and used up before anything is sent, then the code exchanged and the set
    stored. Raises ConnectFailed, recorded by `audit.record_refusal`; nothing is stored on
    failure."""
    if not state:
        raise ConnectFailed("no_state")
    row = OAuthState.objects.filter(digest=_digest(state)).first()
    if row is None:
        raise ConnectFailed("unknown_state")
    actor = Actor(account_id=row.account_id, token_prefix=BROWSER_ACTOR, request_id=request_id)
    try:
        return _finish(row, actor, state=state, code=code, error=error, cookies=cookies)
    except ConnectFailed as failed:
        if failed.why not in UNRECORDED:
            audit.record_refusal(
                actor,
                Operation.FINISH_CONNECT,
                status=failed.status,
                service=row.service,
                target=failed.detail,
            )
        raise


def _finish(
    row: OAuthState,
    actor: Actor,
    *,
    state: str,
    code: str,
    error: str,
    cookies: Mapping[str, str],
) -> Connected:
    # Only the browser that continued the connect may finish it; another browser's attempt
    # leaves the connect to it.
    nonce = cookies.get(cookie_name(state), "")
    if not row.browser_digest or not hmac.compare_digest(_digest(nonce), row.browser_digest):
        raise ConnectFailed("other_browser")
    # Single-use whatever follows: of two callbacks with one state, one deletes it.
    if not OAuthState.objects.filter(pk=row.pk).delete()[0]:
        raise ConnectFailed("unknown_state")
    provider = catalog.get(row.provider)
    if row.expires_at <= timezone.now() or provider is None or provider.oauth is None:
        raise ConnectFailed("expired")
    name = provider.name
    if error:
        raise ConnectFailed("provider_error", provider=name, code=printable(error))
    if not code:
        raise ConnectFailed("no_code", provider=name)
    client = client_of(account_id=row.account_id, provider=row.provider)
    if client is None:
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
        raise ConnectFailed("unavailable", provider=name) from None
    except provider_oauth.Misconfigured as exc:
        raise ConnectFailed(
            "misconfigured", provider=name, code=printable(exc.code), detail=exc.code
        ) from None
    except provider_oauth.TokenError as exc:
        raise ConnectFailed("refused", provider=name, detail=exc.code) from None
    api_host = provider.api_host
    if api_host and answer.api_host is not None and not api_host.base_url(answer.api_host):
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


def printable(text: str) -> str:
    """A provider's error code as a page may show it: a short code, nothing else."""
    kept = "".join(c for c in text[:64] if c.isascii() and (c.isalnum() or c in "_-."))
    return kept or "an error"
