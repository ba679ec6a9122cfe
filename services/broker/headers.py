"""Which of the agent's request headers reach the provider, and the one rule set every route's
request headers obey (the proxy's and MCP's `call_api`).

- A name is an RFC 9110 token (5.6.2); a value holds no control character (a tab, a CR or LF,
  and so no line folding, included; DEL too) and no character beyond Latin-1, which no header
  can carry. Anything else is refused: 400 `invalid_proxy_request`, nothing sent.
- The names the proxy drops (below) or checks against the grant (the method overrides,
  methods.py) are matched by their `canonical` form: case-insensitively, with `_` read as `-`,
  as a server behind a WSGI or CGI gateway reads them (`X_HTTP_Method_Override` is
  `X-HTTP-Method-Override` there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from providers import placement
from services.exceptions import InvalidProxyRequest

# Headers of the agent's request that never reach the provider: credentials and identity of
# the agent's own hop, forwarding headers (RFC 9110 7.6.3, and the `X-Forwarded-` family), and
# hop-by-hop headers (RFC 9110 7.6.1). The credential placement's own headers are removed too,
# whatever the agent sent in them, and so are the method overrides (methods.py).
DROPPED_REQUEST_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "forwarded",
        "via",
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
        # The approval an agent repeats its call under is credvault's (services/consent/).
        "x-credvault-approval",
    }
)
FORWARDED_PREFIX = "x-forwarded-"
# The headers that ask a server to take the request for another method (methods.py): each
# method they name is checked against the grant, and they are never sent on.
METHOD_OVERRIDE_HEADERS = frozenset(
    {"x-http-method-override", "x-http-method", "x-method-override"}
)

_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\x20-\x7e\x80-\xff]*")


def canonical(name: str) -> str:
    """A header name as the drop and override rules match it: lower case, `_` read as `-`."""
    return name.lower().replace("_", "-")


def check_headers(headers: Mapping[str, str]) -> None:
    """Raise InvalidProxyRequest unless every name is a token and every value a plain one."""
    for name, value in headers.items():
        if not _NAME.fullmatch(name):
            raise InvalidProxyRequest("A header name is not an RFC 9110 token.")
        if not _VALUE.fullmatch(value):
            raise InvalidProxyRequest(
                f"The value of the header {name} holds a control character (a line break or a "
                "tab included) or a character beyond Latin-1."
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
    connection_named = {
        canonical(token)
        for token in header_tokens(
            ((canonical(name), value) for name, value in agent_headers.items()), "connection"
        )
    }
    placed_names = {canonical(name) for name in placed.header_names}
    headers = {}
    for name, value in agent_headers.items():
        key = canonical(name)
        if not (
            key in DROPPED_REQUEST_HEADERS
            or key.startswith(FORWARDED_PREFIX)
            or key in connection_named
            or key in METHOD_OVERRIDE_HEADERS
            or key in placed_names
        ):
            headers[name] = value
    headers["accept-encoding"] = "identity"
    headers.update(placed.headers)
    return headers
