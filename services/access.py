"""An agent's access to a stored set: the one owner of "the set this grant may use now".

`granted_set` reads the agent's grant for a service with the stored set, in one statement, and
refuses a grant past its expiry as if it were absent (403 not_granted, saying it expired);
`usable_set` opens it, refreshing an OAuth set first when it expires within
CREDVAULT_REFRESH_AHEAD; `refreshed_set` refreshes a set the provider no longer takes (at most
once a minute per service) and reads the grant again. The agent read (services/agents.py) and
the brokered call (services/broker/) both go through them, so a grant removed, a service
removed or a connection that needs the person again is refused the same way on either path.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from providers.identifiers import OAUTH
from services.audit import Actor
from services.exceptions import NotGranted, ReauthorizationRequired, ServiceNotConnected
from services.grants import grant_expired
from services.models import ServiceStatus
from services.oauth.refresh import refresh_service
from services.sealed import OpenedSet, open_set
from services.set_expiry import refresh_due
from services.storage import queries
from services.times import rfc3339

GrantedSet = queries.GrantedSet


def granted_set(*, actor: Actor, service: str) -> GrantedSet | None:
    """The agent's grant for `service` with the stored set, in one statement: None without a
    grant, `fields` empty when nothing is stored; NotGranted, saying so, when the grant has
    expired."""
    found = queries.read_granted_set(
        account_id=actor.account_id, agent_id=actor.agent_id, service=service
    )
    if found is not None and found.expires_at is not None and grant_expired(found.expires_at):
        raise NotGranted(expired_detail(found.expires_at))
    return found


def expired_detail(expires_at: datetime) -> str:
    """The detail of the refusal of an expired grant."""
    return (
        f"This agent's grant for the service expired at {rfc3339(expires_at)}; the account "
        "can grant it again."
    )


def opened(*, actor: Actor, service: str, found: GrantedSet) -> OpenedSet:
    """The granted set's values, opened and masked."""
    return open_set(
        account_id=actor.account_id,
        service=service,
        generation=found.generation or 0,
        fields=found.fields,
    )


def usable_set(*, actor: Actor, service: str, found: GrantedSet) -> tuple[GrantedSet, OpenedSet]:
    """The set an agent's read or brokered call uses, and its values: refreshed first when it
    is an OAuth set that expires within CREDVAULT_REFRESH_AHEAD. Raises
    ReauthorizationRequired (409), OAuthClientMisconfigured (409) or ProviderUnavailable
    (503)."""
    if found.status == ServiceStatus.REAUTHORIZATION_REQUIRED:
        raise ReauthorizationRequired()
    fields = opened(actor=actor, service=service, found=found)
    ahead = settings.CREDVAULT_REFRESH_AHEAD
    if found.key_type != OAUTH or not refresh_due(fields.by_name, ahead=ahead):
        return found, fields
    refresh_service(actor=actor, service=service, generation=found.generation or 0)
    fresh = _read_again(actor=actor, service=service)
    return fresh, opened(actor=actor, service=service, found=fresh)


def refreshed_set(*, actor: Actor, service: str, generation: int) -> GrantedSet:
    """The provider refused the access token of `generation` (a brokered call answered 401):
    refresh the service past it (here, or by waiting for the worker that does), then read the
    grant and the set again. Such a refresh runs at most once a minute per service: within the
    minute the set read again is the one the provider refused. NotGranted when the grant went
    meanwhile, ServiceNotConnected when the set did, ReauthorizationRequired when the person
    must connect again."""
    refresh_service(actor=actor, service=service, generation=generation, after_401=True)
    return _read_again(actor=actor, service=service)


def _read_again(*, actor: Actor, service: str) -> GrantedSet:
    fresh = granted_set(actor=actor, service=service)
    if fresh is None:
        raise NotGranted()
    if not fresh.fields:
        raise ServiceNotConnected()
    if fresh.status == ServiceStatus.REAUTHORIZATION_REQUIRED:
        raise ReauthorizationRequired()
    return fresh
