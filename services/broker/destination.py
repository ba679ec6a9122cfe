"""Where a brokered call goes and where its credential is placed: from the catalog and the
server's configuration only (or the connection's own API host, where the catalog names the
field that holds it and the host matches the catalog's patterns), never from the request.

A provider with more than one host names its other bases in the catalog: a call reaches
one at `{service}~{base}/{path}` (Hugging Face's `router`, Dropbox's `content`), and, where
the catalog gives a host pattern, a host of the call's choosing that the pattern matches at
`{service}~host/{host}/{path}` (Pinecone's index hosts). The credential is placed the same way
on every base."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

from providers import bases, catalog, placement
from providers.http.destinations import Destination, named_destination
from providers.identifiers import BASE_NAME_PATTERN, BASE_SEPARATOR, HOST_BASE
from services.exceptions import InvalidProxyPath, NotProxyable

# A host as a call names it after `~host/`: DNS labels and dots, nothing else (no port, no
# user info, no percent-encoding, no brackets).
_HOST_TEXT = re.compile(r"[A-Za-z0-9.-]{1,253}")


@dataclass(frozen=True, slots=True)
class Base:
    """Which base of its service a call names: `name` empty for the API base, a name of the
    catalog's `bases`, or `host` with the `host` the call chose (lower case)."""

    name: str = ""
    host: str = ""

    @property
    def spelling(self) -> str:
        """As the proxy's path spells it after the service: ``, `~router`, `~host/{host}`."""
        if not self.name:
            return ""
        host = f"/{self.host}" if self.name == HOST_BASE else ""
        return f"{BASE_SEPARATOR}{self.name}{host}"


def named_base(base: str | None, raw_path: str) -> tuple[Base, str]:
    """The base that the proxy path names after the service (`base`: what follows `~`, None
    without one) and the path below it: for `~host`, the path's first segment is the host.
    Only the spelling is checked here (`checked_base` holds it to the catalog); a base name
    or a host that cannot be one is InvalidProxyPath."""
    if base is None:
        return Base(), raw_path
    if not BASE_NAME_PATTERN.fullmatch(base):
        raise InvalidProxyPath("The name after `~` is not a base name.")
    if base != HOST_BASE:
        return Base(base), raw_path
    host, separator, rest = raw_path.removeprefix("/").partition("/")
    if not _HOST_TEXT.fullmatch(host) or _is_address(host):
        raise InvalidProxyPath("After `~host/` comes a DNS name: no port, user info or address.")
    return Base(HOST_BASE, host.lower()), separator + rest


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.rsplit(".", 1)[-1].isdigit()  # `1.2.3` and `0x7f.1` are addresses to some
    return True


def checked_base(provider: catalog.Provider | None, base: Base) -> None:
    """InvalidProxyPath unless the catalog gives the service the base the call names, and the
    host of a `~host` call matches the provider's host pattern (the server's replacement, or
    the catalog's)."""
    if not base.name:
        return
    if provider is None or base.name not in provider.base_names:
        raise InvalidProxyPath("The service has no base of this name.")
    if base.name == HOST_BASE:
        pattern = bases.host_pattern_for(provider)
        if pattern is None or not pattern.matches(base.host):
            raise InvalidProxyPath("The host does not match the service's host pattern.")


def destination_for(
    provider: catalog.Provider,
    fields: Mapping[str, placement.Revealable] | None = None,
    *,
    base: Base = Base(),
) -> Destination:
    """The API base of calls with the set `fields` (`bases.destination_for`: the
    operator's override, the connection's own API host, the catalog's), or NotProxyable.

    A named base goes to its server-side override (CREDVAULT_PROVIDER_BASE_URLS'
    `{service}~{base}`), else to the catalog's URL. A `~host` call goes to the host it chose
    (`checked_base` has matched it) under the outbound rules of a URL no configuration chose
    (`named_destination`: https to public addresses, unless
    CREDVAULT_OUTBOUND_ALLOWED_HOSTS names the host)."""
    if base.name == HOST_BASE:
        pattern = bases.host_pattern_for(provider)
        found = named_destination(pattern.url(base.host)) if pattern else None
        if found is None:
            raise NotProxyable("The host may not be reached: it is not https.")
        return found
    if base.name:
        override = bases.configured_base_urls().get(f"{provider.id}{BASE_SEPARATOR}{base.name}")
        if override is not None:
            return Destination.from_base_url(override, configured=True)
        return Destination.from_base_url(provider.bases[base.name], configured=provider.operator)
    destination = bases.destination_for(provider, fields)
    if destination is None:
        raise NotProxyable("This provider's host is the customer's own: the operator sets it.")
    return destination


def has_destination(provider: catalog.Provider) -> bool:
    """Whether brokered calls to `provider` have somewhere to go before any set is read: the
    server's or the catalog's address, or the connection's own API host (its set holds it)."""
    return provider.api_host is not None or bases.destination_for(provider) is not None


def placed_credential(
    provider: catalog.Provider, fields: Mapping[str, placement.Revealable]
) -> placement.Placement:
    """The set's credential placed as the catalog's check of its shape says, or NotProxyable."""
    shape = provider.match(fields).shape
    if shape is None or shape.check is None:
        raise NotProxyable("The catalog does not say where this set's credential goes.")
    try:
        return placement.place(shape.check.auth, shape.check.path, fields)
    except placement.Unsendable:
        raise NotProxyable("The stored value cannot travel in a request header.") from None
