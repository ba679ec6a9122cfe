"""Which webhook URLs are accepted: `https` with a host whose addresses are all public, or any
http(s) URL whose host CREDVAULT_WEBHOOK_ALLOWED_HOSTS names (an internal receiver). Checked
when an endpoint is created or changed, and again by the outbound client at each delivery
(resolved once, public addresses only, no redirect followed)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from django.conf import settings

from providers.http.addresses import is_public
from providers.http.destinations import Destination, parse_allowed_hosts
from providers.http.failures import OutboundError
from providers.http.resolving import resolve_within
from services.exceptions import InvalidWebhookUrl

MAX_URL_LENGTH = 2048
# How long creating an endpoint waits for its host's addresses.
LOOKUP_SECONDS = 2.0


@lru_cache(maxsize=4)
def _allowed(raw: str) -> frozenset[tuple[str, int | None]]:
    return parse_allowed_hosts(raw)


def allowed_host(host: str, port: int) -> bool:
    """Whether CREDVAULT_WEBHOOK_ALLOWED_HOSTS names `host` (with any port, or this one)."""
    allowed = _allowed(settings.CREDVAULT_WEBHOOK_ALLOWED_HOSTS)
    return (host.lower(), None) in allowed or (host.lower(), port) in allowed


def destination_of(url: str) -> Destination:
    """Where deliveries to `url` go, `configured` when the operator allows its host; raises
    InvalidWebhookUrl for a URL that is neither https nor of an allowed host."""
    if len(url) > MAX_URL_LENGTH or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise InvalidWebhookUrl("The URL is too long or holds a space or control character.")
    try:
        destination = Destination.from_base_url(url, configured=False)
    except ValueError:
        raise InvalidWebhookUrl("The URL is not an http(s) URL with a host.") from None
    if "@" in url.split("//", 1)[-1].split("/", 1)[0]:
        raise InvalidWebhookUrl("The URL may not hold a user name or password.")
    if allowed_host(destination.host, destination.port):
        return replace(destination, configured=True)
    if destination.scheme != "https":
        raise InvalidWebhookUrl("The URL must be https.")
    return destination


def target_of(url: str) -> str:
    """The request target of `url`: its path (at least `/`) and query."""
    rest = url.split("//", 1)[1]
    slash = rest.find("/")
    question = rest.find("?")
    starts = [i for i in (slash, question) if i != -1]
    if not starts:
        return "/"
    target = rest[min(starts) :].split("#", 1)[0]
    return target if target.startswith("/") else "/" + target


def checked_url(url: str) -> str:
    """`url` if an endpoint may have it: its destination is acceptable and, unless allowed,
    every address its host has now is public (a name that does not resolve now is checked at
    each delivery)."""
    destination = destination_of(url)
    if not destination.configured:
        try:
            addresses = resolve_within(destination.host, destination.port, LOOKUP_SECONDS)
        except OutboundError:
            addresses = []
        if any(not is_public(address) for address in addresses):
            raise InvalidWebhookUrl("The URL's host has an address that is not public.")
    return url
