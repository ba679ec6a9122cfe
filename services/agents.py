"""Agents, their grants and tokens, and the agent credential read.

Plain functions with keyword-only arguments. Each records its audit event as it succeeds;
every change is one transaction, its event included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError
from django.utils import timezone

from services import audit, bearer_tokens
from services.access import granted_set, usable_set
from services.accounts import IssuedToken, create_token, expires_at
from services.audit import Actor, Operation
from services.exceptions import (
    AgentNotFound,
    NotGranted,
    ReadNotGranted,
    ServiceNotConnected,
    TokenNotFound,
)
from services.grants import Given, GrantSpec, checked_grants
from services.identifiers import agent_name, service_identifier
from services.models import (
    Agent,
    AgentToken,
    AuditEvent,
    Grant,
    GrantAccess,
)
from services.sealed import OpenedSet
from services.storage.transactions import account_transaction
from services.webhooks import events


@dataclass(frozen=True)
class AgentWithGrants:
    """An agent as the API shows it: its name, when it was created, its grants by service."""

    name: str
    created_at: datetime
    services: list[GrantSpec]


@dataclass(frozen=True)
class AgentPut:
    """An agent after a PUT, whether the PUT created it, and its audit event."""

    agent: AgentWithGrants
    created: bool
    event: AuditEvent


@dataclass(frozen=True)
class IssuedAgentToken:
    issued: IssuedToken
    event: AuditEvent


@dataclass(frozen=True)
class AgentCredentials:
    """One complete stored set, as handed to an authorized agent. Values stay masked."""

    service: str
    key_type: str
    connected_at: datetime
    fields: OpenedSet

    def __repr__(self) -> str:
        return (
            f"AgentCredentials(service={self.service!r}, key_names={[n for n, _ in self.fields]!r})"
        )


def _view(agent: Agent, grants: Iterable[GrantSpec]) -> AgentWithGrants:
    return AgentWithGrants(
        name=agent.name,
        created_at=agent.created_at,
        services=sorted(grants, key=lambda grant: grant.service),
    )


def list_agents(*, actor: Actor) -> list[AgentWithGrants]:
    """The account's agents with their granted services, by name (two queries)."""
    agents = (
        Agent.objects.filter(account_id=actor.account_id)
        .prefetch_related("grants")
        .order_by("name")
    )
    views = [_view(agent, map(GrantSpec.of, agent.grants.all())) for agent in agents]
    audit.record(actor, Operation.LIST_AGENTS)
    return views


def _put_once(*, actor: Actor, name: str, services: list[GrantSpec]) -> AgentPut:
    with account_transaction(actor.account_id):
        agent = (
            Agent.objects.select_for_update().filter(account_id=actor.account_id, name=name).first()
        )
        created = agent is None
        if agent is None:
            agent = Agent.objects.create(account_id=actor.account_id, name=name)
        else:
            agent.grants.all().delete()
        Grant.objects.bulk_create(
            Grant(
                agent=agent,
                service=grant.service,
                access=grant.access,
                methods=list(grant.methods),
                paths=list(grant.paths),
                base=grant.base,
                graphql=list(grant.graphql),
                expires_at=grant.expires_at,
                approve=[rule.as_json() for rule in grant.approve],
            )
            for grant in services
        )
        operation = Operation.CREATE_AGENT if created else Operation.REPLACE_GRANTS
        event = audit.record(actor, operation, target=name)
    return AgentPut(_view(agent, services), created, event)


def put_agent(*, actor: Actor, name: str, services: Sequence[Given]) -> AgentPut:
    """Create the agent or replace its grants with exactly `services`, each checked against
    the grant rules (services/grants.py: InvalidRequest naming every broken one); grants of one
    service count once when they are the same. A removed grant ends the agent's access to that
    service with this transaction's commit."""
    name = agent_name(name)
    grants = checked_grants(services)
    try:
        return _put_once(actor=actor, name=name, services=grants)
    except IntegrityError:
        # Two requests created the same agent at once: the loser replaces the winner's grants.
        return _put_once(actor=actor, name=name, services=grants)


def delete_agent(*, actor: Actor, name: str) -> AuditEvent:
    """Delete the agent and its grants; its tokens are refused from the next request on."""
    name = agent_name(name)
    with account_transaction(actor.account_id):
        deleted, _ = Agent.objects.filter(account_id=actor.account_id, name=name).delete()
        if not deleted:
            raise AgentNotFound()
        event = audit.record(actor, Operation.DELETE_AGENT, target=name)
        events.raise_event(
            account_id=actor.account_id, type=events.AGENT_DELETED, data={"agent": name}
        )
        return event


def issue_agent_token(
    *, actor: Actor, name: str, expires_in: timedelta | None = None
) -> IssuedAgentToken:
    """A new `cva_` token for the agent; its plaintext is in the result and nowhere else."""
    name = agent_name(name)
    with account_transaction(actor.account_id):
        agent = _agent(actor, name)
        issued = create_token(
            AgentToken,
            bearer_tokens.AGENT_KIND,
            account_id=actor.account_id,
            agent=agent,
            agent_name=agent.name,
            expires_at=expires_at(expires_in),
        )
        event = audit.record(actor, Operation.ISSUE_AGENT_TOKEN, target=name)
        events.raise_event(
            account_id=actor.account_id,
            type=events.AGENT_TOKEN_CREATED,
            data={
                "agent": name,
                "tokenPrefix": issued.token.prefix,
                "expiresAt": events.iso(issued.token.expires_at),
            },
        )
    return IssuedAgentToken(issued, event)


def _agent(actor: Actor, name: str) -> Agent:
    agent = Agent.objects.filter(account_id=actor.account_id, name=name).first()
    if agent is None:
        raise AgentNotFound()
    return agent


def list_agent_tokens(*, actor: Actor, name: str) -> list[AgentToken]:
    """The agent's tokens, oldest first: prefixes and dates, never a token or a digest."""
    name = agent_name(name)
    tokens_of_agent = list(_agent(actor, name).tokens.order_by("created_at", "pk"))
    audit.record(actor, Operation.LIST_AGENT_TOKENS, target=name)
    return tokens_of_agent


def revoke_agent_token(*, actor: Actor, name: str, prefix: str) -> AuditEvent:
    """Revoke the agent's token with this display prefix (already revoked: unchanged); it is
    refused from its next request."""
    name = agent_name(name)
    with account_transaction(actor.account_id):
        token = _agent(actor, name).tokens.filter(prefix=prefix).first()
        if token is None:
            raise TokenNotFound()
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            events.raise_event(
                account_id=actor.account_id,
                type=events.AGENT_TOKEN_REVOKED,
                data={"agent": name, "tokenPrefix": prefix},
            )
        return audit.record(actor, Operation.REVOKE_AGENT_TOKEN, target=name)


def read_credentials(*, actor: Actor, service: str) -> AgentCredentials:
    """The agent read: the complete stored set of a granted service, or NotGranted (403),
    ReadNotGranted (403: the grant is for brokered calls only) or ServiceNotConnected (404).

    The grant, the service row and its fields come from one statement, so the set is that of
    a single committed store even while another store replaces it. Its audit event is
    appended before anything is answered. Both statements are atomic by themselves, so no
    transaction (two more round trips on PostgreSQL) surrounds them. Nothing decrypted is kept
    after the response.
    """
    service = service_identifier(service)
    found = granted_set(actor=actor, service=service)
    if found is None:
        raise NotGranted()
    if found.access != GrantAccess.READ:
        raise ReadNotGranted()
    if not found.fields or found.key_type is None or found.connected_at is None:
        raise ServiceNotConnected()
    _, fields = usable_set(actor=actor, service=service, found=found)
    audit.record(actor, Operation.READ_CREDENTIALS, service=service)
    return AgentCredentials(
        service=service,
        key_type=found.key_type,
        connected_at=found.connected_at,
        fields=fields,
    )
