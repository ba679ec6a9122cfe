"""The brokered call, in the order a request meets its rules.

The path is checked (nothing is sent for a path that could leave the provider's API); the grant
is read with the stored set in one statement (no grant, a method or path outside it, every
method the request names counted, nothing stored: refused, nothing sent); an endpoint that
mints a credential needs a grant that names it (sensitive endpoints); the token's calls in
flight are counted (at most CREDVAULT_PROXY_MAX_CONCURRENT); the set is made usable (refreshed
first when it is an OAuth set about to expire); the destination and the credential's placement
come from the catalog; the call goes through the strict outbound client; the answer is passed
back with every injected value redacted. A call answered 401 for an OAuth set is refreshed once
and retried once, for the methods a provider may receive twice. Each call is one audit event:
`agent.proxy`, service, method, path without its query, the provider's status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from providers import catalog, outbound, sensitive
from providers.identifiers import OAUTH
from services import audit
from services.access import GrantedSet, granted_set, refreshed_set, usable_set
from services.audit import Actor, Operation
from services.broker.answers import ProxyAnswer, agents_answer, failure
from services.broker.destination import destination_for, placed_credential
from services.broker.headers import outbound_headers
from services.broker.limits import call_in_flight
from services.broker.methods import methods_named
from services.broker.paths import ProxyPath, checked_path, grant_allows
from services.exceptions import (
    InvalidProxyPath,
    InvalidProxyRequest,
    NotGranted,
    NotProxyable,
    SensitiveEndpointRefused,
    ServiceNotConnected,
)
from services.masking import Secret

# A call answered 401 for an OAuth set is refreshed once and retried once with these methods:
# the ones a provider may receive twice.
RETRIED_AFTER_REFRESH = frozenset({"GET", "HEAD", "PUT", "DELETE"})


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


def call(*, actor: Actor, service: str, request: ProxyRequest) -> ProxyAnswer:
    """Make the agent's call to its provider with the stored credential; record its event."""
    path = checked_path(request.raw_path)
    methods = methods_named(method=request.method, headers=request.headers, query=request.query)
    if request.body and methods & outbound.BODILESS_METHODS:
        # An override that names GET, HEAD or OPTIONS on a request with a body: a provider
        # that honours it reads the body as the start of the next request.
        raise InvalidProxyRequest()
    found = granted_set(actor=actor, service=service)
    if found is None or not _allowed(found, methods, path):
        raise NotGranted()
    if not found.fields:
        raise ServiceNotConnected()
    provider = catalog.get(service)
    if provider is None:
        raise NotProxyable(
            "credvault has no API address for this service: the operator can add it to the "
            "catalog with CREDVAULT_EXTRA_CATALOG."
        )
    _refuse_sensitive(provider, found, methods, path)
    with call_in_flight(token_prefix=actor.token_prefix):
        proxied = _call_provider(actor, service, provider, found, request, path, methods)
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


def _allowed(found: GrantedSet, methods: set[str], path: ProxyPath) -> bool:
    return all(grant_allows(found, method, path) for method in methods)


def _refuse_sensitive(
    provider: catalog.Provider, found: GrantedSet, methods: set[str], path: ProxyPath
) -> None:
    """SensitiveEndpointRefused for a call to an endpoint that mints, reveals or widens a
    credential, unless the grant names its path explicitly (providers/sensitive.py)."""
    for method in methods:
        if sensitive.refused(
            provider.sensitive, method=method, path=path.text, prefixes=found.paths
        ):
            raise SensitiveEndpointRefused()


def _call_provider(
    actor: Actor,
    service: str,
    provider: catalog.Provider,
    found: GrantedSet,
    request: ProxyRequest,
    path: ProxyPath,
    methods: set[str],
) -> ProxyAnswer:
    used, fields = usable_set(actor=actor, service=service, found=found)
    answer, sent = _send(provider, fields, request, path, pool_key=(actor.account_id, service))
    if (
        answer.status == 401
        and used.key_type == OAUTH
        and request.method in RETRIED_AFTER_REFRESH
        and any(name == "refresh_token" for name, _ in fields)
    ):
        # The provider no longer takes the access token: refreshed once, retried once.
        fresh = refreshed_set(actor=actor, service=service, generation=used.generation or 0)
        if fresh.generation == used.generation:
            # Refreshed after a 401 within the last minute: the provider's 401 stands.
            return agents_answer(answer, sent)
        if not _allowed(fresh, methods, path):
            raise NotGranted()
        _refuse_sensitive(provider, fresh, methods, path)
        _, fields = usable_set(actor=actor, service=service, found=fresh)
        answer, sent = _send(provider, fields, request, path, pool_key=(actor.account_id, service))
    return agents_answer(answer, sent)


def _send(
    provider: catalog.Provider,
    fields: list[tuple[str, Secret]],
    request: ProxyRequest,
    path: ProxyPath,
    *,
    pool_key: tuple[int, str],
) -> tuple[outbound.Answer, tuple[str, ...]]:
    """One request to the provider with the set's credential placed, at the set's API base
    (a refreshed set may name another host), on a connection only this account's calls to
    this service use (`pool_key`): its answer, and every value the call injected (for the
    redaction)."""
    destination = destination_for(provider, dict(fields))
    placed = placed_credential(provider, dict(fields))
    target = destination.base_path + placed.path_prefix + path.encoded
    if request.query:
        target += "?" + request.query
    joined = urlsplit(f"{destination.scheme}://{destination.authority}{target}")
    if (joined.scheme, joined.hostname, joined.port or destination.port) != (
        destination.scheme,
        destination.host,
        destination.port,
    ) or not joined.path.startswith(destination.base_path):
        raise InvalidProxyPath()
    try:
        answer = outbound.send(
            destination=destination,
            method=request.method,
            target=target,
            headers=outbound_headers(request.headers, placed),
            body=request.body
            if request.body or request.method in ("POST", "PUT", "PATCH")
            else None,
            timeout=float(settings.CREDVAULT_PROXY_TIMEOUT),
            max_answer=int(settings.CREDVAULT_PROXY_MAX_RESPONSE),
            pool_key=pool_key,
        )
    except outbound.OutboundError as exc:
        raise failure(exc.kind) from None
    return answer, placed.sent
