"""What the listing commands and the admin show of a token: its times and its status.

`token_status` is the one definition of a token's status; `live_tokens` is the same rule as a
query (the tokens whose status is `active`), for counting in the database.
tests/services/test_admin.py holds the two to each other for every status.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from django.db.models import Q, QuerySet

from services.models import AgentToken, BearerToken

Token = TypeVar("Token", bound=BearerToken)


def when(moment: datetime | None) -> str:
    """A moment to the second, in UTC (TIME_ZONE), as the admin shows it."""
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def token_status(token: BearerToken, now: datetime) -> str:
    if token.is_revoked:
        return "revoked"
    if token.is_expired(now):
        return "expired"
    if not token.account.is_active:
        return "account inactive"
    if isinstance(token, AgentToken) and token.agent_id is None:
        return "agent deleted"
    return "active"


def live_tokens(tokens: QuerySet[Token], now: datetime) -> QuerySet[Token]:
    """The tokens of `tokens` whose `token_status` is `active` at `now`."""
    live = tokens.filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now),
        revoked_at__isnull=True,
        account__is_active=True,
    )
    if issubclass(tokens.model, AgentToken):
        live = live.filter(agent__isnull=False)
    return live
