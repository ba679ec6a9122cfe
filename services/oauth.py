"""OAuth connections (CONTRACT 12): an account's clients, the connect flow, and refresh.

- **Clients.** One per account and provider; the secret sealed like a credential value.
- **Connect.** A random state, single-use (its row is deleted as it is used), bound to the
  account, the provider and the service, expiring in STATE_SECONDS. Only its SHA-256 digest is
  stored; the PKCE verifier is derived from it and SECRET_KEY, so it is stored nowhere. The
  callback checks the state before anything is sent, then exchanges the code and stores the
  set as one store (`credentials.store_credentials`).
- **Refresh.** A set whose `expires_at` is within CREDVAULT_REFRESH_AHEAD seconds is refreshed
  before it is used. One refresh per service at a time across workers and hosts: a worker
  claims the service row in the database (`refreshing_until`, set only where the row is still
  at the generation it read and unclaimed), asks the token URL with no database connection
  held, and stores the answer as the next generation in one transaction, the rotated refresh
  token with it (a provider that sends none: the old one is kept). The others wait for the new
  generation and use it. A refusal of the grant marks `reauthorization_required` (the set
  stays for inspection); a refusal of the client itself (`invalid_client` and the like: the
  account's configuration, which no consent repairs) and an unavailable token URL change
  nothing.
- **A connection's own API host.** Where the catalog names the field of a token answer that
  holds it (Salesforce's `instance_url`), it is stored with the set when it matches the
  catalog's host patterns; a connect whose answer names another host stores nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from providers import catalog
from providers import oauth as provider_oauth
from providers.identifiers import OAUTH
from services import audit, credentials
from services.audit import BROWSER_ACTOR, Actor, Operation
from services.crypto import Place, key_ring
from services.exceptions import (
    NotGranted,
    OAuthClientMisconfigured,
    OAuthClientNotFound,
    OAuthNotSupported,
    ProviderUnavailable,
    ReauthorizationRequired,
    ServiceNotConnected,
)
from services.masking import Secret
from services.models import ConnectedService, OAuthClient, OAuthState, ServiceStatus
from services.sealed import OAUTH_CLIENT_SECRETS, client_secret_place
from services.storage import queries
from services.storage.connections import give_back_connections

STATE_SECONDS = 600
CALLBACK_PATH = "/oauth/callback"
# How long a claimed refresh holds before another worker may take it over: the token URL's
# bound and a margin.
CLAIM_MARGIN_SECONDS = 5.0
WAIT_STEP_SECONDS = 0.05


# --- clients --------------------------------------------------------------------------------


def oauth_provider(provider_id: str) -> catalog.Provider:
    provider = catalog.get(provider_id)
    if provider is None or provider.oauth is None:
        raise OAuthNotSupported()
    return provider


def put_client(
    *, actor: Actor, provider: str, client_id: str, client_secret: Secret
) -> tuple[OAuthClient, int]:
    """Create or replace the account's client of `provider`: it, and the status (201, 200)."""
    oauth_provider(provider)
    key_id, ciphertext = key_ring().seal(
        client_secret, client_secret_place(account_id=actor.account_id, provider=provider)
    )
    with transaction.atomic():
        queries.lock_audit_head(account_id=actor.account_id)
        client, created = OAuthClient.objects.update_or_create(
            account_id=actor.account_id,
            provider=provider,
            defaults={
                "client_id": client_id,
                "key_id": key_id,
                "secret_ciphertext": ciphertext,
                "created_at": timezone.now(),
            },
        )
        operation = Operation.CREATE_OAUTH_CLIENT if created else Operation.REPLACE_OAUTH_CLIENT
        return client, audit.record(actor, operation, service=provider).status


def list_clients(*, actor: Actor) -> list[OAuthClient]:
    clients = list(OAuthClient.objects.filter(account_id=actor.account_id).order_by("provider"))
    audit.record(actor, Operation.LIST_OAUTH_CLIENTS)
    return clients


def delete_client(*, actor: Actor, provider: str) -> None:
    with transaction.atomic():
        queries.lock_audit_head(account_id=actor.account_id)
        deleted, _ = OAuthClient.objects.filter(
            account_id=actor.account_id, provider=provider
        ).delete()
        if not deleted:
            raise OAuthClientNotFound()
        audit.record(actor, Operation.DELETE_OAUTH_CLIENT, service=provider)


def _client(account_id: int, provider: str) -> provider_oauth.Client | None:
    row = OAuthClient.objects.filter(account_id=account_id, provider=provider).first()
    if row is None:
        return None
    secret = OAUTH_CLIENT_SECRETS.open(key_ring(), row)
    return provider_oauth.Client(row.client_id, secret.reveal())


# --- connect --------------------------------------------------------------------------------


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
    client = _client(actor.account_id, provider)
    if client is None:
        raise OAuthClientNotFound()
    target = credentials.service_identifier(service) if service else provider
    chosen = tuple(scopes) if scopes is not None else found.oauth.scopes  # type: ignore[union-attr]
    state = secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(seconds=STATE_SECONDS)
    with transaction.atomic():
        queries.lock_audit_head(account_id=actor.account_id)
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


class CallbackFailed(Exception):
    """Why a callback connected nothing: a sentence for the page, never a value."""

    def __init__(self, reason: str, *, status: int = 400) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class Connected:
    provider_name: str
    service: str


def finish_connect(*, state: str, code: str, error: str, request_id: str) -> Connected:
    """The callback: the state checked and used up before anything is sent, then the code
    exchanged and the set stored. Raises CallbackFailed; nothing is stored on failure."""
    if not state:
        raise CallbackFailed("The link has no state: start the connection again.")
    row = OAuthState.objects.filter(digest=_digest(state)).first()
    # Single-use whatever follows: of two callbacks with one state, one deletes it.
    if row is None or not OAuthState.objects.filter(pk=row.pk).delete()[0]:
        raise CallbackFailed("This connection link is unknown or was used already.")
    actor = Actor(account_id=row.account_id, token_prefix=BROWSER_ACTOR, request_id=request_id)
    provider = catalog.get(row.provider)
    if row.expires_at <= timezone.now() or provider is None or provider.oauth is None:
        _failed(actor, row.service, 400, "expired")
        raise CallbackFailed("This connection link has expired: start the connection again.")
    if error:
        _failed(actor, row.service, 400, "provider_error")
        raise CallbackFailed(f"{provider.name} did not connect: {_printable(error)}.")
    if not code:
        _failed(actor, row.service, 400, "no_code")
        raise CallbackFailed(f"{provider.name} sent no authorization code.")
    client = _client(row.account_id, row.provider)
    if client is None:
        _failed(actor, row.service, 409, "no_client")
        raise CallbackFailed("The account's OAuth client was removed during the connection.")
    give_back_connections()
    try:
        tokens = provider_oauth.exchange_code(
            provider,
            client=client,
            code=code,
            verifier=_verifier(state),
            redirect_uri=redirect_uri(),
        )
    except provider_oauth.Unavailable:
        _failed(actor, row.service, 503, "unavailable")
        raise CallbackFailed(f"{provider.name} could not be reached.", status=502) from None
    except provider_oauth.Misconfigured as exc:
        _failed(actor, row.service, 409, exc.code)
        raise CallbackFailed(
            f"The OAuth client is misconfigured: {provider.name} refused its client ID or "
            f"secret ({_printable(exc.code)}). Correct the account's OAuth client, then "
            "connect again. Nothing was stored.",
            status=409,
        ) from None
    except provider_oauth.TokenError as exc:
        _failed(actor, row.service, 400, exc.code or "refused")
        raise CallbackFailed(f"{provider.name} refused the authorization code.") from None
    api_host = provider.api_host
    if api_host and tokens.api_host is not None and not api_host.base_url(tokens.api_host):
        _failed(actor, row.service, 400, "api_host_refused")
        raise CallbackFailed(
            f"{provider.name} named an API host ({api_host.field}) that is not "
            f"{api_host.rule}. Nothing was stored."
        )
    fields = _token_fields(
        tokens, previous_refresh=None, scopes=tuple(row.scopes), provider=provider
    )
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


def _printable(text: str) -> str:
    """The provider's `error` as the page may show it: a short code, nothing else."""
    kept = "".join(c for c in text[:64] if c.isascii() and (c.isalnum() or c in "_-."))
    return kept or "an error"


# --- the set's fields -----------------------------------------------------------------------


def _token_fields(
    tokens: provider_oauth.Tokens,
    *,
    previous_refresh: Secret | None,
    scopes: tuple[str, ...],
    provider: catalog.Provider,
) -> list[tuple[str, Secret]]:
    """The set of a token answer. Its API host (where the provider names one) is taken only
    when it matches the catalog's patterns: the callback refuses another one first, and a
    refresh keeps the stored one (`_refresh_and_store`)."""
    fields: list[tuple[str, Secret]] = [("access_token", Secret(tokens.access_token))]
    api_host = provider.api_host
    if api_host is not None and tokens.api_host and api_host.base_url(tokens.api_host):
        fields.append((api_host.field, Secret(tokens.api_host)))
    refresh_token = Secret(tokens.refresh_token) if tokens.refresh_token else previous_refresh
    if refresh_token is not None:
        fields.append(("refresh_token", refresh_token))
    if tokens.expires_in is not None:
        expires_at = timezone.now() + timedelta(seconds=max(0, tokens.expires_in))
        fields.append(("expires_at", Secret(expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"))))
    scope = tokens.scope if tokens.scope is not None else " ".join(scopes)
    if scope:
        fields.append(("scope", Secret(scope)))
    if tokens.token_type:
        fields.append(("token_type", Secret(tokens.token_type)))
    return fields


def expiry_of(fields: dict[str, Secret]) -> datetime | None:
    """A set's `expires_at`: RFC 3339 (as credvault stores it) or seconds since the epoch (as
    some imported sets hold it); None when absent or unreadable."""
    value = fields.get("expires_at")
    if value is None:
        return None
    text = value.reveal().strip()
    try:
        if text.isdigit():
            return datetime.fromtimestamp(int(text), tz=UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _due(fields: dict[str, Secret], *, ahead: float) -> bool:
    expires_at = expiry_of(fields)
    return (
        "refresh_token" in fields
        and expires_at is not None
        and expires_at <= timezone.now() + timedelta(seconds=ahead)
    )


# --- refresh --------------------------------------------------------------------------------


def usable_set(
    *, actor: Actor, service: str, found: queries.GrantedSet
) -> tuple[queries.GrantedSet, list[tuple[str, Secret]]]:
    """The set an agent's read or brokered call uses, and its values: refreshed first when it
    is an OAuth set that expires within CREDVAULT_REFRESH_AHEAD. Raises
    ReauthorizationRequired (409), OAuthClientMisconfigured (409) or ProviderUnavailable
    (503)."""
    from services.agents import granted_set, open_fields

    if found.status == ServiceStatus.REAUTHORIZATION_REQUIRED:
        raise ReauthorizationRequired()
    fields = open_fields(actor=actor, service=service, found=found)
    if found.key_type != OAUTH or not _due(
        dict(fields), ahead=float(settings.CREDVAULT_REFRESH_AHEAD)
    ):
        return found, fields
    refresh_service(actor=actor, service=service, generation=found.generation or 0)
    fresh = granted_set(actor=actor, service=service)
    if fresh is None:
        raise NotGranted()  # the grant went while the set was refreshed
    if not fresh.fields:
        raise ServiceNotConnected()
    if fresh.status == ServiceStatus.REAUTHORIZATION_REQUIRED:
        raise ReauthorizationRequired()
    return fresh, open_fields(actor=actor, service=service, found=fresh)


def refresh_service(*, actor: Actor, service: str, generation: int) -> None:
    """Move the service past `generation` with a refreshed set: by refreshing it here, or by
    waiting for the worker that does. Raises ReauthorizationRequired,
    OAuthClientMisconfigured or ProviderUnavailable."""
    timeout = float(settings.CREDVAULT_VERIFY_TIMEOUT)
    gives_up = time.monotonic() + timeout + 2 * CLAIM_MARGIN_SECONDS
    while True:
        row = (
            ConnectedService.objects.filter(account_id=actor.account_id, service=service)
            .values("id", "generation", "status", "oauth_provider")
            .first()
        )
        if row is None:
            raise ReauthorizationRequired()
        if row["generation"] != generation:
            return  # another worker stored the next generation: use it
        if row["status"] == ServiceStatus.REAUTHORIZATION_REQUIRED:
            raise ReauthorizationRequired()
        if _claim(row["id"], generation, seconds=timeout + CLAIM_MARGIN_SECONDS):
            _refresh_claimed(
                actor=actor,
                service=service,
                provider=_provider_of(row["oauth_provider"] or service),
                service_id=row["id"],
                generation=generation,
            )
            return
        give_back_connections()
        if time.monotonic() > gives_up:
            raise ProviderUnavailable()
        time.sleep(WAIT_STEP_SECONDS)


def _claim(service_id: int, generation: int, *, seconds: float) -> bool:
    """Take the service's refresh: only where it is still at `generation` and no other
    worker's claim holds. One UPDATE, so two workers never both win."""
    now = timezone.now()
    with transaction.atomic():
        return bool(
            ConnectedService.objects.filter(pk=service_id, generation=generation)
            .filter(Q(refreshing_until__isnull=True) | Q(refreshing_until__lt=now))
            .update(refreshing_until=now + timedelta(seconds=seconds))
        )


def _release(service_id: int, generation: int) -> None:
    ConnectedService.objects.filter(pk=service_id, generation=generation).update(
        refreshing_until=None
    )


def _refresh_claimed(
    *,
    actor: Actor,
    service: str,
    provider: catalog.Provider | None,
    service_id: int,
    generation: int,
) -> None:
    """The claim is ours: read the set, ask the token URL, store the answer."""
    try:
        _refresh_and_store(
            actor=actor,
            service=service,
            provider=provider,
            service_id=service_id,
            generation=generation,
        )
    except BaseException:
        _release(service_id, generation)
        raise


def _refresh_and_store(
    *,
    actor: Actor,
    service: str,
    provider: catalog.Provider | None,
    service_id: int,
    generation: int,
) -> None:
    stored = dict(_stored_fields(actor.account_id, service, service_id, generation))
    refresh_token = stored.get("refresh_token")
    client = _client(actor.account_id, provider.id) if provider else None
    if client is None and "client_id" in stored and "client_secret" in stored:
        client = provider_oauth.Client(
            stored["client_id"].reveal(), stored["client_secret"].reveal()
        )
    if provider is None or refresh_token is None or client is None:
        _mark_reauthorization(actor, service, service_id, generation, why="no_client")
        raise ReauthorizationRequired()
    give_back_connections()
    try:
        tokens = provider_oauth.refresh(
            provider, client=client, refresh_token=refresh_token.reveal()
        )
    except provider_oauth.Unavailable:
        audit.record(actor, Operation.REFRESH, status=503, service=service, target="unavailable")
        raise ProviderUnavailable() from None
    except provider_oauth.Misconfigured as exc:
        # The client, not the person's grant: the status stays, so that the connection
        # works again as soon as the client is corrected.
        audit.record(actor, Operation.REFRESH, status=409, service=service, target=exc.code)
        raise OAuthClientMisconfigured() from None
    except provider_oauth.Refused as exc:
        _mark_reauthorization(actor, service, service_id, generation, why=exc.code or "refused")
        raise ReauthorizationRequired() from None
    fields = _token_fields(
        tokens, previous_refresh=refresh_token, scopes=_scopes(stored), provider=provider
    )
    # A refresh answer without an acceptable API host keeps the stored one: the new tokens
    # are stored all the same, so that a rotated refresh token is never lost.
    taken = {name for name, _ in fields}
    fields += [
        (name, stored[name])
        for name in ("client_id", "client_secret", "id_token", _host_field(provider))
        if name in stored and name not in taken
    ]
    _store_generation(actor, service, service_id, generation, fields)


def _scopes(stored: dict[str, Secret]) -> tuple[str, ...]:
    return tuple(stored["scope"].reveal().split()) if "scope" in stored else ()


def _host_field(provider: catalog.Provider) -> str:
    return provider.api_host.field if provider.api_host is not None else ""


def _provider_of(provider_id: str) -> catalog.Provider | None:
    provider = catalog.get(provider_id)
    return provider if provider is not None and provider.oauth is not None else None


def _stored_fields(
    account_id: int, service: str, service_id: int, generation: int
) -> list[tuple[str, Secret]]:
    ring = key_ring()
    return [
        (
            field.key_name,
            ring.open(
                field.key_id,
                bytes(field.ciphertext),
                Place(account_id, service, field.key_name, generation),
                field_id=field.pk,
            ),
        )
        for field in ConnectedService.objects.get(pk=service_id).fields.all()
    ]


def _store_generation(
    actor: Actor,
    service: str,
    service_id: int,
    generation: int,
    fields: list[tuple[str, Secret]],
) -> None:
    """The refreshed set as the next generation, in one transaction with its audit event;
    nothing when another store moved the service meanwhile."""
    with transaction.atomic():
        locked = queries.lock_service(account_id=actor.account_id, service=service)
        if locked is None or locked.id != service_id or locked.generation != generation:
            return
        queries.replace_fields(
            service_id=service_id,
            generation=generation + 1,
            key_type=OAUTH,
            connected_at=timezone.now(),
            fields=credentials.sealed(
                account_id=actor.account_id,
                service=service,
                generation=generation + 1,
                fields=fields,
            ),
        )
        audit.record(actor, Operation.REFRESH, service=service)


def _mark_reauthorization(
    actor: Actor, service: str, service_id: int, generation: int, *, why: str
) -> None:
    with transaction.atomic():
        queries.lock_audit_head(account_id=actor.account_id)
        ConnectedService.objects.filter(pk=service_id, generation=generation).update(
            status=ServiceStatus.REAUTHORIZATION_REQUIRED, refreshing_until=None
        )
        audit.record(actor, Operation.REFRESH, status=409, service=service, target=why[:64])


# --- the command ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    account_id: int
    service: str
    error: str = ""


def refresh_expiring(*, ahead_seconds: float):
    """Refresh every OAuth set that expires within `ahead_seconds` (manage.py
    refresh_tokens): one Outcome per set tried, as it is done."""
    rows = ConnectedService.objects.filter(
        key_type=OAUTH, status=ServiceStatus.CONNECTED
    ).values_list("id", "account_id", "service", "generation")
    candidates = []
    for service_id, account_id, service, generation in rows:
        fields = dict(_stored_fields(account_id, service, service_id, generation))
        if _due(fields, ahead=ahead_seconds):
            candidates.append((account_id, service, generation))
    yield len(candidates)
    for account_id, service, generation in candidates:
        actor = Actor.command(account_id)
        try:
            refresh_service(actor=actor, service=service, generation=generation)
        except ReauthorizationRequired:
            yield Outcome(account_id, service, "reauthorization_required")
        except OAuthClientMisconfigured:
            yield Outcome(account_id, service, "oauth_client_misconfigured")
        except ProviderUnavailable:
            yield Outcome(account_id, service, "provider_unavailable")
        else:
            yield Outcome(account_id, service)
