"""The one address an outbound call connects to: its host's name is looked up once, within the
call's deadline (no socket timeout interrupts getaddrinfo), and that address is the one
connected to, so no second lookup an attacker's DNS answers differently is made; TLS is still
checked against the name. A host no configuration named must resolve to public addresses only
(`providers.http.addresses`)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from providers.http.addresses import is_public
from providers.http.destinations import Destination
from providers.http.failures import Failure, OutboundError

LOOKUP_THREADS = 8


def _resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, as the system resolver gives them (tests put their own)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


resolver: Callable[[str, int], list[str]] = _resolve


# Name lookups run here, so that a call waits for one only as long as its deadline allows: no
# socket timeout interrupts getaddrinfo. A lookup that hangs holds one of these threads (a
# greenlet under gevent) until the system resolver gives up; the call has returned long before.
_lookups = ThreadPoolExecutor(max_workers=LOOKUP_THREADS, thread_name_prefix="credvault-lookup")


def resolve_within(host: str, port: int, seconds: float) -> list[str]:
    """`resolver(host, port)`, waited for at most `seconds`. Raises OutboundError."""
    try:
        return [str(ipaddress.ip_address(host))]  # a literal address is its own answer
    except ValueError:
        pass
    try:
        return _lookups.submit(resolver, host, port).result(timeout=seconds)
    except FutureTimeout:
        raise OutboundError(Failure.TIMEOUT) from None
    except (OSError, UnicodeError):
        raise OutboundError(Failure.UNAVAILABLE) from None


def address_for(destination: Destination, *, seconds: float) -> str:
    """The one address this call connects to, its name looked up within `seconds`."""
    addresses = resolve_within(destination.host, destination.port, seconds)
    if not addresses:
        raise OutboundError(Failure.UNAVAILABLE)
    if not destination.configured and not all(is_public(a) for a in addresses):
        # One private answer among public ones is how rebinding starts: refuse them all.
        raise OutboundError(Failure.ADDRESS_REFUSED)
    return addresses[0]
