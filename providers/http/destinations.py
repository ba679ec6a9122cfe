"""Where an outbound call may go: a `Destination` comes from the catalog or the server's own
configuration, never from a request. A host the configuration names (an override of
CREDVAULT_PROVIDER_BASE_URLS, an entry of CREDVAULT_EXTRA_CATALOG, a host
CREDVAULT_OUTBOUND_ALLOWED_HOSTS names) is `configured` and may be a private address; any other
is held to public addresses (`providers.http.resolving`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a call goes: scheme, host and port, the base path every call stays under, and
    whether the server's own configuration named the host (then it may be a private one)."""

    scheme: str
    host: str
    port: int
    base_path: str
    configured: bool

    @classmethod
    def from_base_url(cls, base_url: str, *, configured: bool) -> Destination:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a base URL is an http(s) URL with a host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), configured)

    @property
    def authority(self) -> str:
        """The Host header: the name, with the port when it is not the scheme's own."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def parse_allowed_hosts(raw: str) -> frozenset[tuple[str, int | None]]:
    """CREDVAULT_OUTBOUND_ALLOWED_HOSTS: comma-separated `host` (any port) or `host:port`
    (an IPv6 address in brackets), as `(host, port or None)`. Raises ValueError naming the
    entry that is neither."""
    allowed = set()
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        try:
            parts = urlsplit(f"//{entry}")
            port = parts.port
        except ValueError:
            raise ValueError(f"{entry!r} is not a host or host:port") from None
        if not parts.hostname or parts.username or parts.password or parts.path:
            raise ValueError(f"{entry!r} is not a host or host:port")
        allowed.add((parts.hostname.lower(), port))
    return frozenset(allowed)


@lru_cache(maxsize=4)
def _allowed_hosts(raw: str) -> frozenset[tuple[str, int | None]]:
    return parse_allowed_hosts(raw)


def host_allowed(host: str, port: int) -> bool:
    """Whether CREDVAULT_OUTBOUND_ALLOWED_HOSTS names `host` (with any port, or this one)."""
    from django.conf import settings

    allowed = _allowed_hosts(settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS)
    host = host.lower()
    return (host, None) in allowed or (host, port) in allowed


def named_destination(url: str) -> Destination | None:
    """Where a URL that no configuration chose may take a call (a host a catalog pattern
    matched, a redirect credvault follows): an `https` URL, to public addresses only; or any
    http(s) URL whose host CREDVAULT_OUTBOUND_ALLOWED_HOSTS names (an internal service, a
    test's stand-in), which may then be private. None for any other URL."""
    try:
        destination = Destination.from_base_url(url, configured=False)
    except ValueError:
        return None
    if host_allowed(destination.host, destination.port):
        return replace(destination, configured=True)
    return destination if destination.scheme == "https" else None
