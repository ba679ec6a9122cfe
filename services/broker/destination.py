"""Where a brokered call goes and where its credential is placed: from the catalog and the
server's configuration only (or the connection's own API host, where the catalog names the
field that holds it and the host matches the catalog's patterns), never from the request."""

from __future__ import annotations

from collections.abc import Mapping

from providers import catalog, outbound, placement, verification
from services.exceptions import NotProxyable


def destination_for(
    provider: catalog.Provider, fields: Mapping[str, placement.Revealable] | None = None
) -> outbound.Destination:
    """The API base of calls with the set `fields` (`verification.destination_for`: the
    operator's override, the connection's own API host, the catalog's), or NotProxyable."""
    destination = verification.destination_for(provider, fields)
    if destination is None:
        raise NotProxyable("This provider's host is the customer's own: the operator sets it.")
    return destination


def has_destination(provider: catalog.Provider) -> bool:
    """Whether brokered calls to `provider` have somewhere to go before any set is read: the
    server's or the catalog's address, or the connection's own API host (its set holds it)."""
    return provider.api_host is not None or verification.destination_for(provider) is not None


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
