"""The verification engine: one catalog check, one HTTP request, one verdict.

The request goes through the strict outbound client (providers/outbound.py): no
redirect followed, TLS verified, nothing from the environment, the whole call bounded by
CREDVAULT_VERIFY_TIMEOUT, at most 1 MiB of the answer read (a JSON condition reads at most 64
KiB of it), no retry. Every failure becomes a reason without passing an exception's text
(which can hold a URL or a header) to a log or a caller. Only the catalog's host, its
server-side override from CREDVAULT_PROVIDER_BASE_URLS, or the connection's own API host where
the catalog names one and the host matches its patterns, is ever contacted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from urllib.parse import quote, urlsplit

from django.conf import settings

from providers import catalog, outbound, placement
from providers.catalog import Check
from providers.identifiers import BASE_NAME_PATTERN, HOST_BASE, SERVICE_PATTERN, split_base

logger = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 1024 * 1024
MAX_JSON_BYTES = 64 * 1024
USER_AGENT = "credvault-verifier/1"


class Reason(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    NO_VERIFIER = "no_verifier"


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason

    @property
    def ok(self) -> bool:
        return self.reason in (Reason.ACCEPTED, Reason.NO_VERIFIER)

    @property
    def verified(self) -> bool:
        return self.reason is Reason.ACCEPTED


Revealable = placement.Revealable


# --- server-side base URL overrides ---------------------------------------------------------


class BaseUrlError(ValueError):
    pass


@lru_cache(maxsize=4)
def parse_base_urls(raw: str) -> Mapping[str, str]:
    """Parse CREDVAULT_PROVIDER_BASE_URLS: a JSON object of provider id to http(s) base URL."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        raise BaseUrlError("CREDVAULT_PROVIDER_BASE_URLS is not valid JSON") from None
    if not isinstance(data, dict):
        raise BaseUrlError("CREDVAULT_PROVIDER_BASE_URLS must be a JSON object")
    for provider_id, url in data.items():
        service, base = split_base(provider_id)
        if not SERVICE_PATTERN.fullmatch(service) or not (
            base is None or (BASE_NAME_PATTERN.fullmatch(base) and base != HOST_BASE)
        ):
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_BASE_URLS[{provider_id!r}]: a key is a provider id, or a "
                "provider id, `~` and the name of one of its bases (`huggingface~router`)"
            )
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_BASE_URLS[{provider_id!r}] must be an http(s) URL"
            )
        if parts.query or parts.fragment or parts.username or parts.password:
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_BASE_URLS[{provider_id!r}] must hold no query, "
                "fragment or user info"
            )
    return dict(data)


def unknown_bases(overrides: Mapping[str, str]) -> list[str]:
    """The keys of CREDVAULT_PROVIDER_BASE_URLS that name a base (`huggingface~router`) that
    the catalog does not give that provider."""
    unknown = []
    for key in overrides:
        service, base = split_base(key)
        provider = catalog.get(service)
        if base is not None and (provider is None or base not in provider.bases):
            unknown.append(key)
    return unknown


@lru_cache(maxsize=4)
def parse_host_patterns(raw: str) -> Mapping[str, catalog.HostPattern]:
    """Parse CREDVAULT_PROVIDER_HOST_PATTERNS: a JSON object of provider id to a host pattern
    (catalog.HostPattern), or to the pattern as an http(s) URL with a port
    (`http://*.svc.internal:8443`), replacing the catalog's. Raises BaseUrlError."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        raise BaseUrlError("CREDVAULT_PROVIDER_HOST_PATTERNS is not valid JSON") from None
    if not isinstance(data, dict):
        raise BaseUrlError("CREDVAULT_PROVIDER_HOST_PATTERNS must be a JSON object")
    patterns = {}
    for provider_id, text in data.items():
        provider = catalog.get(provider_id)
        if provider is None or provider.host_pattern is None:
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_HOST_PATTERNS[{provider_id!r}]: the catalog gives this "
                "provider no `host_pattern` to replace"
            )
        try:
            patterns[provider_id] = catalog.parse_host_pattern(text, url_form=True)
        except ValueError as exc:
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_HOST_PATTERNS[{provider_id!r}]: {exc}"
            ) from None
    return patterns


def host_pattern_for(provider: catalog.Provider) -> catalog.HostPattern | None:
    """The hosts calls to `provider` may name: the server's replacement
    (CREDVAULT_PROVIDER_HOST_PATTERNS), else the catalog's pattern, else None."""
    configured = parse_host_patterns(settings.CREDVAULT_PROVIDER_HOST_PATTERNS)
    return configured.get(provider.id, provider.host_pattern)


def configured_base_urls() -> Mapping[str, str]:
    """The server-side overrides of CREDVAULT_PROVIDER_BASE_URLS, by provider id."""
    return parse_base_urls(settings.CREDVAULT_PROVIDER_BASE_URLS)


def base_url_for(provider: catalog.Provider) -> str | None:
    """The base URL to verify against: the server-side override, else the catalog's fixed
    one; None for a per-customer host that the operator has not configured."""
    return configured_base_urls().get(provider.id, provider.base_url)


def connection_base_url(
    provider: catalog.Provider, fields: Mapping[str, Revealable] | None
) -> str | None:
    """The connection's own API base, `https://<host>`, where the catalog names the field that
    holds it (Salesforce's `instance_url`) and the set's value matches the catalog's host
    patterns; else None."""
    if provider.api_host is None or fields is None:
        return None
    value = fields.get(provider.api_host.field)
    return provider.api_host.base_url(value.reveal()) if value is not None else None


def destination_for(
    provider: catalog.Provider, fields: Mapping[str, Revealable] | None = None
) -> outbound.Destination | None:
    """Where every call for `provider` with the set `fields` goes (a check, a brokered call):
    the server-side override, else the connection's own API host (`connection_base_url`),
    else the catalog's fixed host; None for a per-customer host without either. A host the
    server's configuration named (an override, an operator's catalog entry) may be a private
    one; a connection's own host, which its provider named, is held to public addresses like
    the catalog's."""
    override = configured_base_urls().get(provider.id)
    if override is not None:
        return outbound.Destination.from_base_url(override, configured=True)
    own = connection_base_url(provider, fields)
    if own is not None:
        return outbound.Destination.from_base_url(own, configured=False)
    if provider.base_url is None:
        return None
    return outbound.Destination.from_base_url(provider.base_url, configured=provider.operator)


def can_verify(provider: catalog.Provider, shape: catalog.Shape) -> bool:
    """Whether a set of this shape gets a real check here (else `no_verifier`): one with a
    base URL, the catalog's, the operator's, or the connection's own host where the shape
    takes that field (a set without it is checked only with one of the others)."""
    if shape.check is None:
        return False
    own_host = provider.api_host is not None and provider.api_host.field in shape.known
    return base_url_for(provider) is not None or own_host


# --- building the request -------------------------------------------------------------------


def _headers(check: Check, placed: placement.Placement) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    headers.update(check.headers)
    if check.body is not None:
        headers["Content-Type"] = check.content_type
    headers.update(placed.headers)
    return headers


def _path(check: Check, placed: placement.Placement, fields: Mapping[str, Revealable]) -> str:
    """The check's path: its `path_fields` (identifiers such as Twilio's Account SID) filled
    in, each percent-encoded as one segment; a flagged check carries its credential in it
    (Telegram's bot token), percent-encoded and never logged."""
    path = check.path
    for name in check.path_fields:
        path = path.replace("{" + name + "}", quote(fields[name].reveal(), safe=""))
    if not check.credential_in_url:
        return path
    return placed.path_prefix + path.partition("{" + check.auth.field + "}")[2]


def _judge(check: Check, answer: outbound.Answer) -> Reason:
    status = answer.status
    if status in (401, 403):
        return Reason.REJECTED
    if not 200 <= status < 300:
        # Redirects (never followed), 429, 5xx and anything unexpected.
        return Reason.PROVIDER_UNAVAILABLE
    if check.accept_json is None:
        return Reason.ACCEPTED
    if len(answer.body) > MAX_JSON_BYTES:
        return Reason.PROVIDER_UNAVAILABLE
    try:
        document = json.loads(answer.body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return Reason.PROVIDER_UNAVAILABLE
    return Reason.ACCEPTED if check.accept_json.holds(document) else Reason.REJECTED


def run_check(
    provider: catalog.Provider, check: Check, fields: Mapping[str, Revealable], timeout: float
) -> Reason:
    """Send the check's one request and judge the answer within `timeout` seconds.

    The outbound client bounds the whole exchange by the deadline, a name lookup included
    (which no socket timeout interrupts): at the deadline its watchdog shuts the exchange's
    socket down and the check answers `provider_unavailable`. Never raises for network
    trouble.
    """
    destination = destination_for(provider, fields)
    if destination is None:
        return Reason.NO_VERIFIER
    try:
        placed = placement.place(check.auth, check.path, fields)
    except placement.Unsendable:
        # No provider accepts a credential that cannot be sent; nothing is sent.
        logger.info("verification of %s: value not sendable in a header", provider.id)
        return Reason.REJECTED
    started = time.monotonic()
    try:
        answer = outbound.send(
            destination=destination,
            method=check.method,
            target=destination.base_path + _path(check, placed, fields),
            headers=_headers(check, placed),
            body=check.body.encode() if check.body is not None else None,
            timeout=timeout,
            max_answer=MAX_ANSWER_BYTES,
        )
    except outbound.OutboundError as exc:
        reason, status = Reason.PROVIDER_UNAVAILABLE, exc.kind.value
    else:
        reason, status = _judge(check, answer), str(answer.status)
    logger.info(
        "verification of %s: %s (%s) in %.0f ms",
        provider.id,
        reason.value,
        status,
        (time.monotonic() - started) * 1000,
    )
    return reason


def verify(provider_id: str, fields: Mapping[str, Revealable]) -> Verdict:
    """Verify a credential set whose keyNames match one of the provider's shapes.

    A service outside the catalog, or a shape without a check, is `no_verifier`: no request.
    """
    provider = catalog.get(provider_id)
    if provider is None:
        return Verdict(Reason.NO_VERIFIER)
    shape = provider.match(fields).shape
    if shape is None or shape.check is None or destination_for(provider, fields) is None:
        return Verdict(Reason.NO_VERIFIER)
    timeout = settings.CREDVAULT_VERIFY_TIMEOUT
    return Verdict(run_check(provider, shape.check, fields, timeout))
