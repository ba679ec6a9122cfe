"""Where a credential travels in a request to its provider, as the catalog's `auth` says
(bearer, a named header with a prefix, basic, or in the URL's path): one definition for the
verification check and the brokered call, with every secret value it injects, so that an
answer that echoes one, in any form, can be redacted (services/broker/redaction.py). An
identifier it places (the catalog's `secret = false`: Twilio's Account SID as the user name of
a Basic pair) is not among them: the answers that name it reach the agent intact."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from providers.catalog import Auth


class Revealable(Protocol):
    """A masked plaintext value (services.masking.Secret) as the engine needs it."""

    def reveal(self) -> str: ...


class Unsendable(Exception):
    """A credential value cannot travel in an HTTP header (a control or non-ASCII character)."""


def header_safe(value: str) -> str:
    if not value or not value.isascii() or not value.isprintable():
        raise Unsendable
    return value


@dataclass(frozen=True, slots=True)
class Placement:
    """The credential's headers, the path segment that carries it (URL placement only), the
    names of the headers it uses (lower case), and every secret it injects, longest first
    (`sent`: each secret value, and a basic-auth pair as `user:password`, which always holds
    one; never an identifier on its own)."""

    headers: Mapping[str, str]
    path_prefix: str
    header_names: frozenset[str]
    sent: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Placement(header_names={sorted(self.header_names)!r})"


def place(auth: Auth, path: str, fields: Mapping[str, Revealable]) -> Placement:
    """Place the credential of `fields` as `auth` says. `path` is the catalog check's path: for
    URL placement, the part up to the credential's placeholder becomes the prefix of every
    path. Raises Unsendable for a value no header can carry."""
    headers: dict[str, str] = {}
    sent: list[str] = []
    path_prefix = ""
    if auth.type == "bearer":
        value = header_safe(fields[auth.field].reveal())
        headers["Authorization"] = "Bearer " + value
        sent.append(value)
    elif auth.type == "header":
        value = header_safe(fields[auth.field].reveal())
        headers[auth.header] = auth.prefix + value
        sent.append(value)
    elif auth.type == "basic":
        username = fields[auth.username].reveal() if auth.username else auth.username_value
        password = fields[auth.password].reveal() if auth.password in fields else ""
        pair = f"{username}:{password}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        secrets = (name for name in auth.fields if name not in auth.identifiers)
        sent += [pair, *(fields[name].reveal() for name in secrets)]
    elif auth.type == "url":
        value = header_safe(fields[auth.field].reveal())
        placeholder = "{" + auth.field + "}"
        head, _, _ = path.partition(placeholder)
        path_prefix = head + quote(value, safe=":")
        sent.append(value)
    return Placement(
        headers=headers,
        path_prefix=path_prefix,
        header_names=frozenset(name.lower() for name in headers),
        sent=tuple(sorted({form for form in sent if form}, key=len, reverse=True)),
    )
