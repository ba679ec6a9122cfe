"""The doors of identifiers: every business function normalizes the service identifiers, agent
names and account names it is given here, and refuses one that does not normalize with
InvalidIdentifier (AccountError for an account name, which only the commands take). The rule
itself: `providers.identifiers.normalize_service`."""

from __future__ import annotations

from collections.abc import Callable

from providers import identifiers
from services.exceptions import AccountError, InvalidAgentName, InvalidService


def _normalized(raw: str, refused: Callable[[], Exception]) -> str:
    try:
        return identifiers.normalize_service(raw)
    except identifiers.InvalidIdentifier:
        raise refused() from None


def service_identifier(raw: str) -> str:
    """The normalized service identifier of `raw`, or InvalidService."""
    return _normalized(raw, InvalidService)


def agent_name(raw: str) -> str:
    """The normalized agent name of `raw` (the service identifier's rule), or
    InvalidAgentName."""
    return _normalized(raw, InvalidAgentName)


def account_name(raw: str) -> str:
    """The normalized account name of `raw` (`demo`, `acme-corp`: the service identifier's
    rule), or AccountError."""
    return _normalized(raw, lambda: AccountError(f"an account name is {identifiers.SERVICE_RULE}"))
