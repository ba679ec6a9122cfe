"""Which addresses a brokered call or a check may connect to when its host did not come from
the server's own configuration: global unicast addresses, nothing else.

Not public, besides what Python's `ipaddress` already counts as private, loopback, link-local
(169.254.169.254, the clouds' metadata address, among them), shared (100.64.0.0/10),
multicast, unspecified or reserved: every IPv6 address that carries an IPv4 address by
translation or tunnelling, whose real destination is that IPv4 address and which a network
may route to its own inside: IPv4-compatible (`::a.b.c.d`), IPv4-mapped (`::ffff:a.b.c.d`)
and IPv4-translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4
(`2002::/16`), Teredo (`2001::/32`), the deprecated site-local range (`fec0::/10`), and any
address whose interface identifier embeds a non-public IPv4 address (ISATAP's `::5efe:a.b.c.d`).
"""

from __future__ import annotations

import ipaddress

NOT_PUBLIC_V6 = tuple(
    ipaddress.ip_network(network)
    for network in (
        "::/96",  # IPv4-compatible (deprecated), :: and ::1 among them
        "::ffff:0:0/96",  # IPv4-mapped
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT, RFC 2765)
        "64:ff9b::/96",  # NAT64, well-known prefix
        "64:ff9b:1::/48",  # NAT64, local-use prefix
        "2002::/16",  # 6to4
        "2001::/32",  # Teredo
        "fec0::/10",  # site-local (deprecated)
    )
)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an ISATAP interface identifier (`0000:5efe` or `0200:5efe`, then the
    IPv4 address) carries, or None."""
    identifier = int(ip) & ((1 << 64) - 1)
    if (identifier >> 32) & 0xFDFFFFFF != 0x5EFE:
        return None
    return ipaddress.IPv4Address(identifier & 0xFFFFFFFF)


def _public_v4(ip: ipaddress.IPv4Address) -> bool:
    return ip.is_global and not ip.is_multicast


def is_public(address: str) -> bool:
    """Whether `address` (a literal IPv4 or IPv6 address, with or without a zone) is a global
    unicast address that carries no other address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return _public_v4(ip)
    if any(ip in network for network in NOT_PUBLIC_V6):
        return False
    embedded = _embedded_v4(ip)
    if embedded is not None and not _public_v4(embedded):
        return False
    return ip.is_global and not ip.is_multicast
