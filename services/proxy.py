"""Brokered access (CONTRACT 11): an agent asks credvault to call its provider, credvault adds
the credential on the way out, and the agent sees the provider's answer only, with every
injected value redacted from it.

`call` is the whole rule, in the order a request meets it: the path is checked (nothing is
sent for a path that could leave the provider's API), the grant is read with the stored set in
one statement (no grant, a method or path outside it, nothing stored: refused, nothing sent),
the destination comes from the catalog and the server's configuration only (or the
connection's own API host, where the catalog names the field that holds it and the host
matches the catalog's patterns), the credential is placed as the catalog says, and the call
goes through the strict outbound client. Each call is one audit event: `agent.proxy`,
service, method, path without its query, the provider's status.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote_to_bytes, urlsplit

from django.conf import settings

from providers import catalog, outbound, placement, verification
from providers.identifiers import OAUTH
from services import agents, audit, oauth
from services.audit import Actor, Operation
from services.exceptions import (
    InvalidProxyPath,
    NotGranted,
    NotProxyable,
    ServiceNotConnected,
    UpstreamTimeout,
    UpstreamTooLarge,
    UpstreamUnavailable,
)
from services.storage.connections import give_back_connections

REDACTED = b"[REDACTED]"
# A call answered 401 for an OAuth set is refreshed once and retried once with these methods
# (CONTRACT 12): the ones a provider may receive twice.
RETRIED_AFTER_REFRESH = frozenset({"GET", "HEAD", "PUT", "DELETE"})
MAX_PATH_LENGTH = 2048
# Headers of the agent's request that never reach the provider: credentials and identity of
# the agent's own hop, and hop-by-hop headers (RFC 9110 7.6.1). The credential placement's own
# headers are removed too, whatever the agent sent in them.
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
        # The answer is read decoded, so that an echoed value can be redacted (below).
        "accept-encoding",
    }
)
# Headers of the provider's answer that never reach the agent.
DROPPED_ANSWER_HEADERS = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        # The body is passed on decoded and re-framed by credvault.
        "content-length",
        "content-encoding",
    }
)
# A codings the outbound client decodes; an answer in another one cannot be redacted.
DECODED_CODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
# What a path segment may hold unencoded when it is sent on (RFC 3986 pchar, less `@`).
_PATH_SAFE = "/!$&'()*+,;=:-._~"


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """The agent's request: its method, the path after the service as it was sent (still
    percent-encoded: `""` or `/...`), the query string as it came, its headers (lower-case
    names) and its body."""

    method: str
    raw_path: str
    query: str
    headers: Mapping[str, str]
    body: bytes

    def __repr__(self) -> str:
        return f"ProxyRequest({self.method} {self.raw_path!r})"


@dataclass(frozen=True, slots=True)
class ProxyAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def checked_path(raw_path: str) -> str:
    """The path after its one percent-decoding, or InvalidProxyPath.

    After one percent-decoding it holds no `.` or `..` segment, no empty segment (a single
    trailing slash excepted: `/repos/`), no backslash, no control character and no `@`; an
    encoded `/` or `\\` (`%2F`, `%5C`), which would change the segments the provider sees, is
    refused as well. It is sent encoded again (`encoded`), so a decoded `%2e` goes as
    `%252e`."""
    if len(raw_path) > MAX_PATH_LENGTH or _ENCODED_SEPARATOR.search(raw_path):
        raise InvalidProxyPath()
    try:
        decoded = unquote_to_bytes(raw_path or "/").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidProxyPath() from None
    if not decoded.startswith("/") or "\\" in decoded or "@" in decoded:
        raise InvalidProxyPath()
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in decoded):
        raise InvalidProxyPath()
    segments = decoded[1:].split("/")
    if segments[-1] == "" and len(segments) > 1:
        segments.pop()  # one trailing slash
    if decoded != "/" and any(segment in ("", ".", "..") for segment in segments):
        raise InvalidProxyPath()
    return decoded


def encoded(path: str) -> str:
    """A decoded path as it is sent: every character outside a path segment's own set, `%`
    included, percent-encoded."""
    return quote(path, safe=_PATH_SAFE)


def _tokens(headers: Iterable[tuple[str, str]], name: str) -> set[str]:
    """The comma-separated values of every `name` header (lower case): Connection's named
    hop-by-hop headers, Content-Encoding's codings."""
    return {
        token.strip().lower()
        for header, value in headers
        if header.lower() == name
        for token in value.split(",")
    }


def _granted(found, method: str, path: str) -> bool:
    """Whether the grant allows `method` on the decoded `path`: a path prefix matches whole
    segments (`/repos` allows `/repos` and `/repos/x`, never `/reposx`)."""
    if method not in found.methods:
        return False
    return any(
        prefix == "/" or path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/")
        for prefix in found.paths
    )


def destination_for(
    provider: catalog.Provider, fields: Mapping[str, placement.Revealable] | None = None
) -> outbound.Destination:
    """The API base of calls with the set `fields` (`verification.destination_for`: the
    operator's override, the connection's own API host, the catalog's), or NotProxyable."""
    destination = verification.destination_for(provider, fields)
    if destination is None:
        raise NotProxyable("This provider's host is the customer's own: the operator sets it.")
    return destination


def _placement(provider: catalog.Provider, fields: Mapping[str, placement.Revealable]):
    shape = provider.match(fields).shape
    if shape is None or shape.check is None:
        raise NotProxyable("The catalog does not say where this set's credential goes.")
    try:
        return placement.place(shape.check.auth, shape.check.path, fields)
    except placement.Unsendable:
        raise NotProxyable("The stored value cannot travel in a request header.") from None


def _outbound_headers(agent_headers: Mapping[str, str], placed) -> dict[str, str]:
    connection_named = _tokens(agent_headers.items(), "connection")
    headers = {
        name: value
        for name, value in agent_headers.items()
        if name not in DROPPED_REQUEST_HEADERS
        and not name.startswith("x-forwarded-")
        and name not in connection_named
        and name not in placed.header_names
    }
    headers["accept-encoding"] = "identity"
    headers.update(placed.headers)
    return headers


def redact(data: bytes, sent: tuple[str, ...]) -> bytes:
    """Every occurrence of an injected value, in each form it was sent, as [REDACTED]."""
    for form in sent:  # longest first, so that no shorter form cuts a longer one
        data = data.replace(form.encode(), REDACTED)
    return data


def _answer(answer: outbound.Answer, sent: tuple[str, ...]) -> ProxyAnswer:
    if not _tokens(answer.headers, "content-encoding") <= DECODED_CODINGS:
        raise UpstreamUnavailable("The provider answered in an encoding credvault cannot read.")
    connection_named = _tokens(answer.headers, "connection")
    headers = [
        (name, redact(value.encode("latin-1"), sent).decode("latin-1"))
        for name, value in answer.headers
        if name.lower() not in DROPPED_ANSWER_HEADERS and name.lower() not in connection_named
    ]
    return ProxyAnswer(answer.status, headers, redact(answer.body, sent))


def call(*, actor: Actor, service: str, request: ProxyRequest) -> ProxyAnswer:
    """Make the agent's call to its provider with the stored credential; record its event."""
    path = checked_path(request.raw_path)
    found = agents.granted_set(actor=actor, service=service)
    if found is None or not _granted(found, request.method, path):
        raise NotGranted()
    if not found.fields:
        raise ServiceNotConnected()
    provider = catalog.get(service)
    if provider is None:
        raise NotProxyable(
            "credvault has no API address for this service: the operator can add it to the "
            "catalog with CREDVAULT_EXTRA_CATALOG."
        )
    used, fields = oauth.usable_set(actor=actor, service=service, found=found)
    answer, sent = _send(provider, fields, request, path)
    if (
        answer.status == 401
        and used.key_type == OAUTH
        and request.method in RETRIED_AFTER_REFRESH
        and any(name == "refresh_token" for name, _ in fields)
    ):
        # The provider no longer takes the access token: refreshed once, retried once.
        oauth.refresh_service(actor=actor, service=service, generation=used.generation or 0)
        fresh = agents.granted_set(actor=actor, service=service)
        if fresh is None or not _granted(fresh, request.method, path):
            raise NotGranted()
        if not fresh.fields:
            raise ServiceNotConnected()
        _, fields = oauth.usable_set(actor=actor, service=service, found=fresh)
        answer, sent = _send(provider, fields, request, path)
    proxied = _answer(answer, sent)
    audit.record(
        actor,
        Operation.PROXY_CALL,
        status=proxied.status,
        service=service,
        method=request.method,
        path=request.raw_path or "/",
        upstream_status=proxied.status,
    )
    return proxied


def _send(
    provider: catalog.Provider, fields: list, request: ProxyRequest, path: str
) -> tuple[outbound.Answer, tuple[str, ...]]:
    """One request to the provider with the set's credential placed, at the set's API base
    (a refreshed set may name another host): its answer, and every form the credential was
    sent in (for the redaction)."""
    destination = destination_for(provider, dict(fields))
    placed = _placement(provider, dict(fields))
    target = destination.base_path + placed.path_prefix + encoded(path)
    if request.query:
        target += "?" + request.query
    joined = urlsplit(f"{destination.scheme}://{destination.authority}{target}")
    if (joined.scheme, joined.hostname, joined.port or destination.port) != (
        destination.scheme,
        destination.host,
        destination.port,
    ) or not joined.path.startswith(destination.base_path):
        raise InvalidProxyPath()
    give_back_connections()  # the wait on the provider holds no database connection
    try:
        answer = outbound.send(
            destination=destination,
            method=request.method,
            target=target,
            headers=_outbound_headers(request.headers, placed),
            body=request.body
            if request.body or request.method in ("POST", "PUT", "PATCH")
            else None,
            timeout=float(settings.CREDVAULT_PROXY_TIMEOUT),
            max_answer=int(settings.CREDVAULT_PROXY_MAX_RESPONSE),
        )
    except outbound.OutboundError as exc:
        raise _failure(exc.kind) from None
    return answer, placed.sent


def _failure(kind: outbound.Failure) -> Exception:
    if kind is outbound.Failure.TIMEOUT:
        return UpstreamTimeout()
    if kind is outbound.Failure.TOO_LARGE:
        return UpstreamTooLarge()
    if kind is outbound.Failure.ADDRESS_REFUSED:
        return UpstreamUnavailable("The provider's address is not a public one.")
    return UpstreamUnavailable()
