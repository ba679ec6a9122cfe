"""credvault's own tokens never leave: a brokered request that still carries an account or
agent token (`cvt_`, `cva_`) once the places the agent token is read from have been taken out
(the header that carried it, the path segment of a provider whose credential goes in the path)
is refused, 400 `agent_token_in_request`, and nothing is sent. Another header, the query
string, the path and the body are searched, each as it is and percent-decoded
(`services.bearer_tokens.carries_token`). Through MCP's `call_api` no argument is a place the
agent token is read from: a token anywhere in one is refused the same way.

The body is searched as bytes: a token some SDK writes into a JSON or form body, where its
provider takes its key, is found; one hidden in another encoding (base64, JSON `\\u` escapes,
a compressed body) is not, and docs/security.md says so."""

from __future__ import annotations

from collections.abc import Mapping

from services.bearer_tokens import carries_token
from services.exceptions import AgentTokenInRequest


def refuse_carried_tokens(
    *, headers: Mapping[str, str], path: str, query: str, body: bytes
) -> None:
    """Raise AgentTokenInRequest when any part of the request carries a token."""
    if (
        carries_token(path)
        or carries_token(query)
        or any(carries_token(name) or carries_token(value) for name, value in headers.items())
        or carries_token(body)
    ):
        raise AgentTokenInRequest()


def without_tokens(path: str) -> str:
    """A path as a refusal's audit event records it: each segment that carries a token is
    `...`, so that no token reaches the database."""
    return "/".join("..." if carries_token(segment) else segment for segment in path.split("/"))
