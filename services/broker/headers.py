"""Which of the agent's request headers reach the provider."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from providers import placement
from services.broker.methods import METHOD_OVERRIDE_HEADERS

# Headers of the agent's request that never reach the provider: credentials and identity of
# the agent's own hop, and hop-by-hop headers (RFC 9110 7.6.1). The credential placement's own
# headers are removed too, whatever the agent sent in them, and so are the method overrides
# (methods.py).
DROPPED_REQUEST_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "forwarded",
        "x-real-ip",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
        # The answer is read decoded, so that an echoed value can be redacted.
        "accept-encoding",
    }
)


def header_tokens(headers: Iterable[tuple[str, str]], name: str) -> set[str]:
    """The comma-separated values of every `name` header (lower case): Connection's named
    hop-by-hop headers, Content-Encoding's codings."""
    return {
        token.strip().lower()
        for header, value in headers
        if header.lower() == name
        for token in value.split(",")
    }


def outbound_headers(
    agent_headers: Mapping[str, str], placed: placement.Placement
) -> dict[str, str]:
    """The agent's headers less those that never reach the provider, then the credential."""
    connection_named = header_tokens(agent_headers.items(), "connection")
    headers = {
        name: value
        for name, value in agent_headers.items()
        if name not in DROPPED_REQUEST_HEADERS
        and not name.startswith("x-forwarded-")
        and name not in connection_named
        and name not in METHOD_OVERRIDE_HEADERS
        and name not in placed.header_names
    }
    headers["accept-encoding"] = "identity"
    headers.update(placed.headers)
    return headers
