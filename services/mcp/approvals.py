"""A `call_api` that needs a person's approval, told to the client as its revision can hear it.

In 2026-07-28 a request that declares URL-mode elicitation
(`_meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"]["url"]`) is answered with
that revision's URL interaction: an `InputRequiredResult` whose one input request, keyed by the
approval id, is `elicitation/create` in mode `url` with the approval page (and the approval id
as `elicitationId` too). The client shows the person the page and retries the same
`tools/call`; the gate finds the approval by the call's digest, so no `requestState` is
needed. A retry that answers this approval is not asked again: still undecided, it is the tool
error `approval_pending`, so that no client loops on a prompt.

Every other client, and the handshake revisions (whose capabilities a server without sessions
does not know at `tools/call`), gets a tool error that names the problem, gives the page and
tells the model to hand it to the person and call again with the same arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.exceptions import (
    ApprovalDenied,
    ApprovalExpired,
    ApprovalPending,
    ApprovalProblem,
    ApprovalRequired,
)

# What a model reads for each approval problem: the page to hand on, and what to do next.
_DETAILS: dict[type[ApprovalProblem], str] = {
    ApprovalRequired: (
        "This call needs a person's approval: nothing was sent. Give this address to the person "
        "you work for: {url} . A member of the account allows or denies the call there; once "
        "they have decided, call call_api again with exactly the same arguments."
    ),
    ApprovalPending: (
        "The approval of this call still waits for a person's decision: nothing was sent. Give "
        "this address to the person you work for if they have not opened it yet: {url} . Once "
        "they have decided, call call_api again with exactly the same arguments."
    ),
    ApprovalDenied: (
        "A member of the account denied this call at {url} : nothing was sent. Do not repeat "
        "it; ask the person you work for what to do instead."
    ),
    ApprovalExpired: (
        "The approval of this call expired before a person decided it or it was used: nothing "
        "was sent. Call call_api again with the same arguments to ask again."
    ),
}


@dataclass(frozen=True, slots=True)
class Ask:
    """An approval that a person has still to decide: the page, and what the call is."""

    approval_id: str
    url: str
    call: str  # `POST github/repos/o/r/issues`, for the person

    def __repr__(self) -> str:
        return f"Ask({self.approval_id})"


def refusal(problem: ApprovalProblem) -> dict[str, Any]:
    """The tool error's structured content: the problem's code and members, with a detail that
    tells a model what to do."""
    template = _DETAILS.get(type(problem))
    detail = template.format(url=problem.extra["approvalUrl"]) if template else str(problem.detail)
    return {
        "error": {
            "status": problem.status_code,
            "code": problem.default_code,
            "detail": detail,
            **problem.extra,
        }
    }


def ask_of(problem: ApprovalProblem, *, call: str) -> Ask | None:
    """The approval a person can still decide, or None (denied, expired)."""
    if not isinstance(problem, ApprovalRequired | ApprovalPending):
        return None
    return Ask(problem.approval_id, problem.extra["approvalUrl"], call)


def declares_url_elicitation(capabilities: Any) -> bool:
    """Whether the client capabilities a 2026-07-28 request declares hold URL-mode
    elicitation (an `elicitation` object holding `url`; an empty one means form mode only)."""
    if not isinstance(capabilities, dict):
        return False
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and isinstance(elicitation.get("url"), dict)


def answered(params: Mapping[str, Any], approval_id: str) -> bool:
    """Whether this retry carries the client's response to this approval's elicitation."""
    responses = params.get("inputResponses")
    return isinstance(responses, dict) and approval_id in responses


def input_required(ask: Ask) -> dict[str, Any]:
    """The 2026-07-28 `InputRequiredResult`: one URL elicitation, keyed by the approval id."""
    message = (
        f"An agent asks to call {ask.call} through credvault. A member of the account allows "
        "or denies it on credvault's approval page (sign in there)."
    )
    return {
        "resultType": "input_required",
        "inputRequests": {
            ask.approval_id: {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": message,
                    "url": ask.url,
                    # The revision correlates by the key; clients that read the 2025-11-25
                    # field (the `mcp` package's callback does) find the same id there.
                    "elicitationId": ask.approval_id,
                },
            }
        },
    }
