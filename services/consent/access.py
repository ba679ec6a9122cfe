"""An agent's request for more access, decided equal or narrower by a person.

To be built (issue work in progress): `request_access`, `access_request_of`, `approve_access`.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.audit import Actor
from services.consent.decisions import Decider
from services.grants import Given
from services.models import Approval


def request_access(
    *, actor: Actor, services: Sequence[Given], reason: str, valid_for_minutes: int | None
) -> Approval:
    """A pending access request of the actor's agent (201 in the API)."""
    raise NotImplementedError


def access_request_of(*, actor: Actor, approval_id: str) -> Approval:
    """The agent's own access request, or ApprovalNotFound."""
    raise NotImplementedError


def approve_access(
    *,
    decider: Decider,
    approval_id: str,
    services: Sequence[Given] | None = None,
    valid_for_minutes: int | None = None,
) -> Approval:
    """Approve an access request as asked, or narrower (`services`), for `valid_for_minutes`
    or for good: the agent's grants gain the services granted."""
    raise NotImplementedError
