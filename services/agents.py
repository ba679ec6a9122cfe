"""Agents, their grants and tokens, and the agent credential read (CONTRACT 10).

Plain functions with keyword-only arguments; every change is one transaction that also
appends its audit event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from services import audit, sql, tokens
from services.accounts import IssuedToken, create_token, expiry
from services.crypto import Place, key_ring
from services.exceptions import AgentNotFound, NotGranted, ServiceNotConnected
from services.masking import Secret
from services.models import (
    Account,
    Agent,
    AgentToken,
    AuditAction,
    AuditOutcome,
    Grant,
)


@dataclass(frozen=True)
class AgentView:
    name: str
    created_at: datetime
    services: list[str]


@dataclass(frozen=True)
class AgentCredentials:
    """One complete stored set, as handed to an authorized agent. Values stay masked."""

    service: str
    key_type: str
    connected_at: datetime
    fields: list[tuple[str, Secret]]

    def __repr__(self) -> str:
        return (
            f"AgentCredentials(service={self.service!r}, key_names={[n for n, _ in self.fields]!r})"
        )


def _view(agent: Agent, services: Iterable[str]) -> AgentView:
    return AgentView(name=agent.name, created_at=agent.created_at, services=sorted(services))


def list_agents(*, account: Account) -> list[AgentView]:
    """The account's agents with their granted services, by name (two queries)."""
    agents = Agent.objects.filter(account=account).prefetch_related("grants").order_by("name")
    return [_view(agent, (grant.service for grant in agent.grants.all())) for agent in agents]


def _put_once(
    *, account: Account, name: str, services: list[str], context: audit.AuditContext
) -> tuple[AgentView, bool]:
    with transaction.atomic():
        head = audit.lock_head(context)
        agent = Agent.objects.select_for_update().filter(account=account, name=name).first()
        created = agent is None
        if created:
            agent = Agent.objects.create(account=account, name=name)
        else:
            agent.grants.all().delete()
        Grant.objects.bulk_create(Grant(agent=agent, service=service) for service in services)
        audit.append(
            head,
            context,
            action=AuditAction.AGENTS_PUT,
            outcome=AuditOutcome.SUCCESS,
            status=201 if created else 200,
            target=name,
        )
    return _view(agent, services), created


def put_agent(
    *, account: Account, name: str, services: list[str], context: audit.AuditContext
) -> tuple[AgentView, bool]:
    """Create the agent or replace its grants with exactly `services`. A removed grant ends
    the agent's access to that service with this transaction's commit."""
    try:
        return _put_once(account=account, name=name, services=services, context=context)
    except IntegrityError:
        # Two requests created the same agent at once: the loser replaces the winner's grants.
        return _put_once(account=account, name=name, services=services, context=context)


def delete_agent(*, account: Account, name: str, context: audit.AuditContext) -> None:
    """Delete the agent and its grants; its tokens are refused from the next request on."""
    with transaction.atomic():
        head = audit.lock_head(context)
        deleted, _ = Agent.objects.filter(account=account, name=name).delete()
        if not deleted:
            raise AgentNotFound()
        audit.append(
            head,
            context,
            action=AuditAction.AGENTS_DELETE,
            outcome=AuditOutcome.SUCCESS,
            status=204,
            target=name,
        )


def issue_agent_token(
    *,
    account: Account,
    name: str,
    expires_in: timedelta | None = None,
    context: audit.AuditContext,
) -> IssuedToken:
    """A new `cva_` token for the agent; its plaintext is in the result and nowhere else."""
    with transaction.atomic():
        head = audit.lock_head(context)
        agent = Agent.objects.filter(account=account, name=name).first()
        if agent is None:
            raise AgentNotFound()
        issued = create_token(
            AgentToken,
            tokens.AGENT_KIND,
            account=account,
            agent=agent,
            agent_name=agent.name,
            expires_at=expiry(expires_in),
        )
        audit.append(
            head,
            context,
            action=AuditAction.AGENT_TOKENS_ISSUE,
            outcome=AuditOutcome.SUCCESS,
            status=201,
            target=name,
        )
    return issued


def read_credentials(
    *, token: AgentToken, service: str, context: audit.AuditContext
) -> AgentCredentials:
    """The agent read: the complete stored set of a granted service, or NotGranted (403) or
    ServiceNotConnected (404).

    The grant, the service row and its fields come from one statement: no row means no
    grant, a row without fields means nothing is stored, and the set is that of a single
    committed store even while another store replaces it. Its audit event is appended before
    anything is answered: if the append fails, nothing is. The statement is atomic by itself,
    so no transaction surrounds the two (on PostgreSQL that would be two more round trips, a
    BEGIN and a COMMIT; on SQLite the append takes its own write transaction). Nothing
    decrypted is kept after the response.
    """
    rows = sql.fetch(sql.agent_read, [token.account_id, token.agent_id, service])
    if not rows:
        raise NotGranted()
    if rows[0][3] is None:
        raise ServiceNotConnected()
    key_type, connected_at, generation = rows[0][:3]
    ring = key_ring()
    fields = []
    for _, _, _, pk, key_name, key_id, ciphertext in rows:
        place = Place(token.account_id, service, key_name, generation)
        row = f"credential field {pk} ({service}/{key_name})"
        fields.append((key_name, ring.open(key_id, ciphertext, place, row=row)))
    audit.record(
        context,
        action=AuditAction.AGENT_READ,
        outcome=AuditOutcome.SUCCESS,
        status=200,
        service=service,
    )
    return AgentCredentials(
        service=service,
        key_type=key_type,
        connected_at=sql.as_datetime(connected_at),
        fields=fields,
    )
