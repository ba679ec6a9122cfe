"""The provider's own addresses in an answer, judged and moved onto the proxy: one definition
of "does this address stay under the service's API base, and where does it go" for the
`Location`, `Content-Location` and `Link` headers, the absolute URLs in a JSON body, and the
redirects credvault follows (`redirects`).

An address is resolved against the URL of the provider's request that answered it and its dot
segments removed (`%2e` read as `.`, since a server may decode it before it routes) before it is
judged. One that stays moves to the same place under the service's proxy URL, always absolute
and without dot segments, so no agent can resolve it elsewhere in credvault; one that leaves
passes as the absolute URL it means at the provider. An address with a backslash, a space or a
control character never stays (clients differ on what it means). The rules and examples are in
docs/agents.md#brokered-access ("Addresses").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

REWRITTEN_HEADERS = frozenset({"location", "content-location", "link"})
# A Link value's URI references: `<https://...>; rel="next", <...>; rel="last"`.
_LINK_TARGET = re.compile(r"<([^>]*)>")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# What no address that credvault judges may hold: clients read a backslash as a slash, or not.
_UNJUDGED = re.compile(r"[\x00-\x20\x7f\\]")
_DOT = re.compile(r"%2e", re.IGNORECASE)
_ABSOLUTE = re.compile(r"https?://", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Judged:
    """An address as judged: `url`, the absolute URL it resolves to (dot segments removed), or
    "" when it cannot be judged; `rest`, what follows the base in it (its path below the base,
    query, fragment), or None when it does not stay under the base."""

    url: str
    rest: str | None

    @property
    def stays(self) -> bool:
        return self.rest is not None


def judged(reference: str, *, api_base: str, request_url: str = "") -> Judged:
    """`reference` resolved against `request_url` (the provider's request that answered it;
    the base itself when not given) and judged against `api_base`."""
    return _Base(api_base).judged(reference, request_url)


def onto_proxy(
    headers: list[tuple[str, str]],
    *,
    api_base: str,
    proxy_url: Callable[[], str] | None,
    request_url: str = "",
) -> list[tuple[str, str]]:
    """`headers` with each address of Location, Content-Location and Link that stays under
    `api_base` moved under the URL `proxy_url` builds, and each reference that leaves it made
    absolute (no change when `proxy_url` is None). The URL is built only when a header holds
    an address (building it cost a brokered call about 2% of its instructions). `request_url`:
    the provider's request that answered."""
    if proxy_url is None or not any(name.lower() in REWRITTEN_HEADERS for name, _ in headers):
        return headers
    return _onto(headers, api_base=api_base, proxy_url=proxy_url(), request_url=request_url)


def _onto(
    headers: list[tuple[str, str]], *, api_base: str, proxy_url: str, request_url: str
) -> list[tuple[str, str]]:
    base = _Base(api_base)
    proxy = _Base(proxy_url)
    moved = []
    for name, value in headers:
        lower = name.lower()
        if lower not in REWRITTEN_HEADERS:
            moved.append((name, value))
            continue
        if lower == "link":
            given = [base.moved(t, proxy_url, request_url) for t in _LINK_TARGET.findall(value)]
            value = _LINK_TARGET.sub(_Replaced(given), value)
        else:
            given = [base.moved(value.strip(), proxy_url, request_url)]
            value = given[0]
        if any(proxy.elsewhere_in_credvault(address) for address in given):
            continue  # the provider names credvault's own API beyond this service: dropped
        moved.append((name, value))
    return moved


class _Replaced:
    """A Link value's targets replaced, in order, by `given`."""

    def __init__(self, given: list[str]) -> None:
        self._given = iter(given)

    def __call__(self, match: re.Match[str]) -> str:
        return f"<{next(self._given)}>"


def json_onto_proxy(body: bytes, *, api_base: str, proxy_url: str) -> bytes:
    """A JSON document's string values that are absolute URLs staying under `api_base`, moved
    under `proxy_url` (`body` as it is when `proxy_url` is empty).

    Every other byte is kept as it came: each moved string alone is written anew, as JSON
    writes it (`\\/` for `/` where the provider wrote `\\/`); member names are never changed.
    The body is scanned, not parsed: only a string that starts with the base's scheme and host
    (escaped or not) is read and judged, so the cost is one regular-expression pass and a
    little per address. A body that is not JSON is scanned as if it were."""
    if not proxy_url or not body:
        return body
    return _JsonAddresses(_Base(api_base), proxy_url).moved(body)


class _JsonAddresses:
    """The scan of `json_onto_proxy` for one base and proxy URL."""

    __slots__ = ("base", "pattern", "proxy_url", "written_proxy_url")

    def __init__(self, base: _Base, proxy_url: str) -> None:
        self.base = base
        self.proxy_url = proxy_url
        self.written_proxy_url = proxy_url.encode()
        host = re.escape(base.host.encode())
        # A string token (its opening quote not escaped) that starts with the base's scheme and
        # host, or with an escaped `h`, and that is not a member's name (no `:` follows it).
        self.pattern = re.compile(
            rb'(?<!\\)"(?:'
            + re.escape(base.scheme.encode())
            + rb":(?:\\?/){2}"
            + host
            + rb'(?=[:/?#"\\])|\\u00[46]8)'
            + rb'(?:[^"\\\x00-\x1f]|\\.)*"'
            + rb"(?![ \t\r\n]*:)",
            re.IGNORECASE,
        )

    def moved(self, body: bytes) -> bytes:
        return self.pattern.sub(self._moved, body)

    def _moved(self, match: re.Match[bytes]) -> bytes:
        token = match.group()
        inner = token[1:-1]
        try:
            escaped = b"\\" in inner
            value = json.loads(token) if escaped else inner.decode()
        except ValueError:  # not JSON, or not UTF-8
            return token
        rest = self.base.rest_of_absolute(value)
        if rest is None:
            return token
        if not escaped:
            # No quote, backslash or control character in it: JSON as it stands.
            return b'"' + self.written_proxy_url + rest.encode() + b'"'
        written = json.dumps(self.proxy_url + rest, ensure_ascii=False)
        if b"\\/" in token:
            written = written.replace("/", "\\/")
        return written.encode()


def without_dot_segments(path: str) -> str:
    """`path` (absolute, or empty) with its `.` and `..` segments removed (RFC 3986 5.2.4),
    each segment read with `%2e` as `.`; the other segments are kept as they are."""
    if not path:
        return ""
    segments = path.split("/")[1:]
    kept: list[str] = []
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        dotted = _DOT.sub(".", segment)
        if dotted == "..":
            if kept:
                kept.pop()
        elif dotted != ".":
            kept.append(segment)
            continue
        if last:
            kept.append("")  # `/a/..` is `/`, `/a/.` is `/a/`
    return "/" + "/".join(kept)


class _Base:
    """The service's API base: scheme, host, port and path."""

    __slots__ = ("host", "path", "port", "prefix", "scheme", "url")

    def __init__(self, api_base: str) -> None:
        parts = urlsplit(api_base)
        self.url = api_base
        self.prefix = api_base.rstrip("/")
        self.scheme = parts.scheme.lower()
        self.host = (parts.hostname or "").lower()
        self.port = parts.port or _DEFAULT_PORTS.get(self.scheme)
        self.path = parts.path.rstrip("/")

    def rest_of_absolute(self, value: str) -> str | None:
        """What follows the base in `value` when it is an absolute http(s) URL that stays under
        it, else None. An address written as the base is, with no dot segment and nothing to
        judge, is read at once; any other is resolved and judged in full."""
        if not _ABSOLUTE.match(value):
            return None
        if value.startswith(self.prefix):
            rest = value[len(self.prefix) :]
            if (
                (not rest or rest[0] in "/?#")
                and "/." not in rest
                and "%2e" not in rest.lower()
                and not _UNJUDGED.search(rest)
            ):
                return rest
        return self.judged(value, "").rest

    def moved(self, reference: str, proxy_url: str, request_url: str) -> str:
        """`reference` under `proxy_url` when it stays under the base; else as it came when it
        is absolute, or the absolute URL it resolves to at the provider."""
        judged = self.judged(reference, request_url)
        if judged.rest is not None:
            return proxy_url + judged.rest
        if _Parts(reference).scheme:
            return reference
        return judged.url or urljoin(request_url or self.url + "/", reference)

    def elsewhere_in_credvault(self, reference: str) -> bool:
        """Whether `reference`, an absolute URL, is on this base's host (credvault's, for the
        agent's proxy URL) but not under it: an answer that names another service's proxy or
        credvault's own API."""
        if not _Parts(reference).scheme:
            return False
        address = self.judged(reference, "")
        if address.stays:
            return False
        try:
            parts = urlsplit(address.url or reference)
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
        except ValueError:
            return False
        return ((parts.hostname or "").lower(), port) == (self.host, self.port)

    def judged(self, reference: str, request_url: str) -> Judged:
        if _UNJUDGED.search(reference):
            return Judged("", None)
        try:
            address = _resolved(reference, request_url or self.url + "/")
            parts = urlsplit(address.url)
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
        except ValueError:  # a port that is not a number, a malformed IPv6 host
            return Judged("", None)
        if (parts.scheme.lower(), (parts.hostname or "").lower(), port) != (
            self.scheme,
            self.host,
            self.port,
        ):
            return Judged(address.url, None)
        path = address.path or "/"
        if path != self.path and not path.startswith(self.path + "/"):
            return Judged(address.url, None)  # `/v10` is not under `/v1`
        rest = path[len(self.path) :]
        if not address.path:
            rest = ""  # `https://api.example.com` is the base itself
        return Judged(address.url, rest + address.after_path)


@dataclass(frozen=True, slots=True)
class _Address:
    """An absolute URL as resolved: the whole, its path, and its query and fragment with their
    marks (`?...#...`: an empty query or fragment is kept as the address had it)."""

    url: str
    path: str
    after_path: str


def _resolved(reference: str, request_url: str) -> _Address:
    """`reference` resolved against `request_url` (RFC 3986 5.2.2), its path without dot
    segments. Raises ValueError for what does not parse."""
    ref = _Parts(reference)
    base = _Parts(request_url)
    if ref.scheme:
        scheme, authority, path, query = ref.scheme, ref.authority, ref.path, ref.query
    elif ref.authority is not None:
        scheme, authority, path, query = base.scheme, ref.authority, ref.path, ref.query
    else:
        scheme, authority = base.scheme, base.authority
        if not ref.path:
            path = base.path
            query = ref.query if ref.query is not None else base.query
        elif ref.path.startswith("/"):
            path, query = ref.path, ref.query
        else:
            directory = base.path[: base.path.rfind("/") + 1] if base.path else "/"
            path, query = directory + ref.path, ref.query
    if authority is None or not scheme:
        raise ValueError("an absolute URL has a scheme and an authority")
    if path and not path.startswith("/"):
        raise ValueError("a path after an authority starts with /")
    path = without_dot_segments(path)
    after = ("" if query is None else f"?{query}") + (
        "" if ref.fragment is None else f"#{ref.fragment}"
    )
    return _Address(f"{scheme}://{authority}{path}{after}", path, after)


class _Parts:
    """A URI reference's five parts (RFC 3986 appendix B): None for a part it does not have,
    which differs from an empty one (`?` is an empty query)."""

    __slots__ = ("authority", "fragment", "path", "query", "scheme")

    _SPLIT = re.compile(
        r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$",
        re.DOTALL,
    )

    def __init__(self, reference: str) -> None:
        found = self._SPLIT.match(reference)
        assert found is not None  # every string matches
        self.scheme, self.authority, self.path, self.query, self.fragment = found.groups()
