"""Every method a brokered request names. Besides its request line, a request can ask a server
to treat it as another method: the `X-HTTP-Method-Override`, `X-HTTP-Method` and
`X-Method-Override` headers (their names matched as headers.py matches names: any case, `_`
read as `-`) and a `_method` query parameter (Rails, Laravel, Express' method-override). The
grant must allow each; the headers are never sent on (headers.py), and a `_method` parameter
goes on only when the grant allows the method it names."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl

from services.broker.headers import METHOD_OVERRIDE_HEADERS, canonical

METHOD_OVERRIDE_PARAMETER = "_method"


def methods_named(*, method: str, headers: Mapping[str, str], query: str) -> set[str]:
    """The request line's method and every method an override names, upper case."""
    named = {method.upper()}
    for name, value in headers.items():
        if canonical(name) in METHOD_OVERRIDE_HEADERS:
            named |= {token.strip().upper() for token in value.split(",")} - {""}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.lower() == METHOD_OVERRIDE_PARAMETER and value.strip():
            named.add(value.strip().upper())
    return named
