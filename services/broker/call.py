"""The brokered call, in the order a request meets its rules: the path, the headers, no
credvault token riding along; the grant read with the stored set in one statement; sensitive
endpoints and GraphQL mutations; the token's calls in flight (CREDVAULT_PROXY_MAX_CONCURRENT);
the set made usable (an OAuth set about to expire refreshed first); the destination and the
placement from the catalog; the strict outbound client; redirects that leave the service;
the answer redacted and its addresses moved, whole or as it arrives (`streams`). A 401 for an
OAuth set is refreshed and retried once, for the methods a provider may receive twice.

Each call is one audit event, `agent.proxy`, written before the request leaves (outcome
`sent`), so that a worker killed while the provider holds it still leaves it, and completed
once the call has ended (docs/agents.md#brokered-access).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError

from providers import catalog, sensitive
from providers.http.client import BODILESS_METHODS, OpenAnswer, open_answer
from providers.http.failures import OutboundError
from providers.identifiers import OAUTH
from services import audit
from services.access import GrantedSet, granted_set, refreshed_set, usable_set
from services.audit import Actor
from services.broker.answers import (
    ProxyAnswer,
    addresses_in_body,
    agents_headers,
    failure,
    passed_whole,
    readable,
)
from services.broker.destination import Base, checked_base, destination_for, placed_credential
from services.broker.headers import check_headers, outbound_headers
from services.broker.limits import call_in_flight, check_body
from services.broker.locations import json_onto_proxy, onto_proxy
from services.broker.methods import methods_named
from services.broker.mutations import refuse_sensitive_mutations
from services.broker.paths import ProxyPath, checked_path, grant_allows
from services.broker.redaction import Redaction
from services.broker.redirects import followed
from services.broker.streams import PassedOn
from services.broker.tokens import refuse_carried_tokens
from services.consent.approvals import APPROVAL_HEADER, AskedCall, matching_rule
from services.consent.waiting import APPLIED_HEADER, admit_waiting, read_wait
from services.exceptions import (
    InvalidProxyPath,
    InvalidProxyRequest,
    NotGranted,
    NotProxyable,
    ProblemError,
    SensitiveEndpointRefused,
    ServiceNotConnected,
)
from services.models import AuditOutcome
from services.sealed import OpenedSet

logger = logging.getLogger("credvault.audit")

# A call answered 401 for an OAuth set is refreshed once and retried once with these methods:
# the ones a provider may receive twice.
RETRIED_AFTER_REFRESH = frozenset({"GET", "HEAD", "PUT", "DELETE"})


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """The agent's request: its method, the path after the service as it was sent (still
    percent-encoded: `""` or `/...`), the query string as it came, its headers (lower-case
    names), its body, what builds the URL at which the agent reaches the service through
    credvault (`https://credvault.example/api/v1/agent/proxy/github`: the provider's own
    addresses in the answer are moved there; built only for an answer that holds one, None for
    none moved), and which of the service's bases it names (`destination.Base`;
    the proxy URL then names it too: `.../proxy/huggingface~router`)."""

    method: str
    raw_path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    proxy_url: Callable[[], str] | None = None
    base: Base = Base()  # noqa: RUF009 (frozen: one shared value is safe)

    @property
    def agent_path(self) -> str:
        """The path as the agent spelled it after the service, its base first
        (`~router/v1/chat/completions`): what the audit event records."""
        return self.base.spelling + (self.raw_path or "/")

    def __repr__(self) -> str:
        return f"ProxyRequest({self.method} {self.raw_path!r})"


def call(*, actor: Actor, service: str, request: ProxyRequest, via: str = "") -> ProxyAnswer:
    """Make the agent's call to its provider with the stored credential; record its event
    (`via`: where the call came from besides the proxy route, `mcp`)."""
    started = time.monotonic()
    wait, passed_on = read_wait(request.headers)
    if passed_on is not request.headers:  # the wait preference is credvault's
        request = replace(request, headers=passed_on)
    check_body(request.body)
    path = checked_path(request.raw_path)
    provider = catalog.get(service)
    checked_base(provider, request.base)
    check_headers(request.headers)
    refuse_carried_tokens(
        headers=request.headers, path=request.raw_path, query=request.query, body=request.body
    )
    methods = methods_named(method=request.method, headers=request.headers, query=request.query)
    if request.body and methods & BODILESS_METHODS:
        # An override that names GET, HEAD or OPTIONS on a request with a body: a provider
        # that honours it reads the body as the start of the next request.
        raise InvalidProxyRequest()
    found = granted_set(actor=actor, service=service)
    if found is None:
        raise NotGranted()
    _check_grant(found, methods, path, request.base)
    if not found.fields:
        raise ServiceNotConnected()
    if provider is None:
        raise NotProxyable(
            "credvault has no API address for this service: the operator can add it to the "
            "catalog with CREDVAULT_EXTRA_CATALOG."
        )
    rule = matching_rule(found.approve, methods=methods, path=path)
    # A sensitive endpoint that an `approve` rule names is open, to approved calls only.
    _refuse_sensitive(provider, found, methods, path, also=rule.get("paths", ()) if rule else ())
    refuse_sensitive_mutations(provider=provider, found=found, path=path, request=request)
    event = _Event(actor=actor, service=service, request=request, via=via)
    with ExitStack() as in_flight:
        in_flight.enter_context(call_in_flight(token_prefix=actor.token_prefix))
        applied = ""
        if rule is not None:
            admitted = admit_waiting(
                actor=actor,
                call=AskedCall(
                    service, request.method, request.agent_path, request.query, request.body
                ),
                rule=rule,
                named=request.headers.get(APPROVAL_HEADER, ""),
                wait=wait,
            )
            event.approval, applied = admitted.approval_id, admitted.applied
        try:
            sent = _call_provider(actor, service, provider, found, request, path, methods, event)
            landed = followed(
                sent.answer,
                method=request.method,
                request_url=sent.request_url,
                api_base=sent.api_base,
                pool_key=(actor.account_id, service),
                started=started,
            )
            answer = landed.answer
            readable(answer)
            redaction = sent.redaction
            headers = agents_headers(answer, redaction, method=request.method)
            headers = onto_proxy(
                headers,
                api_base=sent.api_base,
                proxy_url=request.proxy_url,
                request_url=landed.request_url,
            )
            if applied:
                headers.append((APPLIED_HEADER, applied))
            moved_in_body = request.proxy_url is not None and addresses_in_body(
                answer, answer_urls=provider.answer_urls, method=request.method
            )
            if passed_whole(answer, method=request.method) or moved_in_body:
                try:
                    body = answer.read_all()
                except OutboundError as exc:
                    raise failure(exc.kind) from None
                if moved_in_body and request.proxy_url is not None:
                    body = json_onto_proxy(
                        body, api_base=sent.api_base, proxy_url=request.proxy_url()
                    )
                event.complete(answer.status, answer.status, AuditOutcome.SUCCESS)
                return ProxyAnswer(answer.status, headers, redaction.apply(body))
        except ProblemError as problem:
            event.failed(problem)
            raise
        except Exception:
            event.failed(None)
            raise
        # Streamed: the call stays in flight, and its event waits, until the body has ended.
        ended = in_flight.pop_all()

        def finished(outcome: AuditOutcome) -> None:
            ended.close()
            event.complete(answer.status, answer.status, outcome)

        stream = PassedOn(answer=answer, redaction=redaction, finished=finished)
        return ProxyAnswer(answer.status, headers, stream=stream)


class _Event:
    """The audit event of one call: written before its request first leaves (`sending`, with
    the path as sent), completed once when it ends (`complete`), or, should it fail after that,
    with the failure's status (`failed`, which marks the failure as audited so that the view
    records no second event). A call refused before anything was sent has none here: the view
    records its refusal."""

    __slots__ = ("_actor", "_request", "_service", "_via", "approval", "written")

    def __init__(self, *, actor: Actor, service: str, request: ProxyRequest, via: str) -> None:
        self._actor, self._service, self._request, self._via = actor, service, request, via
        self.written: audit.EventRow | None = None
        # The id of the approval the call went under, if it needed one: the event's target.
        self.approval = ""

    def sending(self, sent_path: str) -> None:
        """The request is about to leave for the provider (again, after a refresh: once)."""
        if self.written is None:
            self.written = audit.record_sent(
                self._actor,
                service=self._service,
                method=self._request.method,
                path=self._request.agent_path,
                sent_path=sent_path,
                via=self._via,
                target=self.approval,
            )

    def complete(self, status: int, upstream_status: int | None, outcome: AuditOutcome) -> None:
        if self.written is None or self.written.outcome != AuditOutcome.SENT:
            return
        try:
            audit.complete(
                self.written, status=status, upstream_status=upstream_status, outcome=outcome
            )
        except DatabaseError as exc:
            logger.error("audit event not completed: %s", type(exc).__name__)

    def failed(self, problem: ProblemError | None) -> None:
        """The call failed after its event was written: credvault's status (500 for an
        unexpected error), no provider's status."""
        if self.written is None:
            return
        status = 500 if problem is None else problem.status_code
        self.complete(status, None, AuditOutcome.REFUSED if status < 500 else AuditOutcome.ERROR)
        if problem is not None:
            audit.mark_recorded(problem)


def _check_grant(found: GrantedSet, methods: set[str], path: ProxyPath, base: Base) -> None:
    """NotGranted, saying which, when the base, a method or the path is outside the grant (a
    grant that names a base covers that base only)."""
    if found.base and found.base != base.name:
        raise NotGranted("The base is outside this agent's grant for the service.")
    if not methods <= set(found.methods):
        raise NotGranted("The method is outside this agent's grant for the service.")
    if not all(grant_allows(found, method, path) for method in methods):
        raise NotGranted("The path is outside this agent's grant for the service.")


def _refuse_sensitive(
    provider: catalog.Provider,
    found: GrantedSet,
    methods: set[str],
    path: ProxyPath,
    *,
    also: Sequence[str] = (),
) -> None:
    """SensitiveEndpointRefused for a call to an endpoint that mints, reveals or widens a
    credential, unless the grant names its path explicitly, or the `approve` rule the call
    matched does (`also`: the call then needs an approval) (providers/sensitive.py)."""
    for method in methods:
        if sensitive.refused(
            provider.sensitive,
            method=method,
            path=path.text,
            segments=path.segments,
            prefixes=(*found.paths, *also),
        ):
            raise SensitiveEndpointRefused()


@dataclass(frozen=True, slots=True)
class Sent:
    """A request sent to the provider: its answer (the head in, the body still to read), the
    redaction of every value it injected, the API base it went to, and its URL."""

    answer: OpenAnswer
    redaction: Redaction
    api_base: str
    request_url: str


def _call_provider(
    actor: Actor,
    service: str,
    provider: catalog.Provider,
    found: GrantedSet,
    request: ProxyRequest,
    path: ProxyPath,
    methods: set[str],
    event: _Event,
) -> Sent:
    used, fields = usable_set(actor=actor, service=service, found=found)
    pool_key = (actor.account_id, service)
    sent = _send(provider, fields, request, path, pool_key=pool_key, sending=event.sending)
    if (
        sent.answer.status == 401
        and used.key_type == OAUTH
        and request.method in RETRIED_AFTER_REFRESH
        and any(name == "refresh_token" for name, _ in fields)
    ):
        # The provider no longer takes the access token: refreshed once, retried once. The
        # 401's body is read first, so that its connection is free while the set refreshes.
        _read_ahead(sent.answer)
        fresh = refreshed_set(actor=actor, service=service, generation=used.generation or 0)
        if fresh.generation == used.generation:
            # Refreshed after a 401 within the last minute: the provider's 401 stands.
            return sent
        _check_grant(fresh, methods, path, request.base)
        _refuse_sensitive(provider, fresh, methods, path)
        refuse_sensitive_mutations(provider=provider, found=fresh, path=path, request=request)
        _, fields = usable_set(actor=actor, service=service, found=fresh)
        sent = _send(provider, fields, request, path, pool_key=pool_key, sending=event.sending)
    return sent


def _read_ahead(answer: OpenAnswer) -> None:
    try:
        answer.read_ahead()
    except OutboundError as exc:
        raise failure(exc.kind) from None


def _send(
    provider: catalog.Provider,
    fields: OpenedSet,
    request: ProxyRequest,
    path: ProxyPath,
    *,
    pool_key: tuple[int, str],
    sending: Callable[[str], None],
) -> Sent:
    """One request to the provider with the set's credential placed, at the set's API base
    (a refreshed set may name another host), on a connection only this account's calls to
    this service use (`pool_key`). `sending` is told the path as it is sent (without the
    query, every injected value redacted) just before the request leaves."""
    destination = destination_for(provider, fields.by_name, base=request.base)
    placed = placed_credential(provider, fields.by_name)
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
    redaction = Redaction(placed.sent)
    sending(redaction.apply(joined.path.encode()).decode(errors="replace"))
    try:
        answer = open_answer(
            destination=destination,
            method=request.method,
            target=target,
            headers=outbound_headers(request.headers, placed),
            body=request.body
            if request.body or request.method in ("POST", "PUT", "PATCH")
            else None,
            timeout=settings.CREDVAULT_PROXY_TIMEOUT,
            max_duration=settings.CREDVAULT_PROXY_MAX_DURATION,
            max_answer=settings.CREDVAULT_PROXY_MAX_RESPONSE,
            pool_key=pool_key,
        )
    except OutboundError as exc:
        raise failure(exc.kind) from None
    origin = f"{destination.scheme}://{destination.authority}"
    api_base = origin + destination.base_path + placed.path_prefix
    return Sent(answer, redaction, api_base, origin + target)
