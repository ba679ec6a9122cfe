"""Where a provider's calls go, checks and brokered calls alike: the server's override
(CREDVAULT_PROVIDER_BASE_URLS), else the connection's own API host where the catalog names the
field that holds it and the host matches its patterns, else the catalog's fixed host; and which
hosts a provider's calls may name (CREDVAULT_PROVIDER_HOST_PATTERNS, else the catalog's
pattern). Never from a request."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

from providers import catalog
from providers.http.destinations import Destination
from providers.identifiers import BASE_NAME_PATTERN, HOST_BASE, SERVICE_PATTERN, split_base
from providers.placement import Revealable


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
) -> Destination | None:
    """Where every call for `provider` with the set `fields` goes (a check, a brokered call):
    the server-side override, else the connection's own API host (`connection_base_url`),
    else the catalog's fixed host; None for a per-customer host without either. A host the
    server's configuration named (an override, an operator's catalog entry) may be a private
    one; a connection's own host, which its provider named, is held to public addresses like
    the catalog's."""
    override = configured_base_urls().get(provider.id)
    if override is not None:
        return Destination.from_base_url(override, configured=True)
    own = connection_base_url(provider, fields)
    if own is not None:
        return Destination.from_base_url(own, configured=False)
    if provider.base_url is None:
        return None
    return Destination.from_base_url(provider.base_url, configured=provider.operator)
