"""The brokered call's path: checked before anything is sent, encoded again as it is sent, and
matched against a grant's methods and path prefixes, segment by decoded segment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

from services.exceptions import InvalidProxyPath
from services.storage.queries import GrantedSet

MAX_PATH_LENGTH = 2048
# What a path segment may hold unencoded when it is sent on (RFC 3986 pchar): `/` is not among
# them, so an encoded `/` inside a segment goes on encoded, never as a separator.
_SEGMENT_SAFE = "!$&'()*+,;=:@-._~"
_CLIMBING = ("", ".", "..")


@dataclass(frozen=True, slots=True)
class ProxyPath:
    """A checked path: its decoded segments (none for the API's base) and whether it ended
    with a slash."""

    segments: tuple[str, ...]
    trailing_slash: bool = False

    @property
    def text(self) -> str:
        """The decoded path, its segments joined by `/` (an encoded `/` inside a segment reads
        as a separator here: the reading that refuses the most)."""
        tail = "/" if self.trailing_slash and self.segments else ""
        return "/" + "/".join(self.segments) + tail

    @property
    def encoded(self) -> str:
        """The path as it is sent: each segment's characters outside a segment's own set, `%`
        and `/` included, percent-encoded."""
        tail = "/" if self.trailing_slash and self.segments else ""
        return (
            "/" + "/".join(quote(segment, safe=_SEGMENT_SAFE) for segment in self.segments) + tail
        )


def _climbs(part: str) -> bool:
    """Whether a segment (or a part of one between encoded slashes) is empty, `.` or `..` once
    its parameters are dropped, as Tomcat and Jetty drop them: `..;x` climbs, `;x` is empty."""
    return part.split(";", 1)[0] in _CLIMBING


def checked_path(raw_path: str) -> ProxyPath:
    """The path as the agent sent it (percent-encoded), checked, or InvalidProxyPath.

    Each segment is percent-decoded once, by itself, so that an encoded `/` (`%2F`: GitLab's
    `group%2Fname`) stays inside its segment and is sent on encoded. What is refused is
    listed under `400 invalid_proxy_path` in docs/agents.md; a segment's parts between encoded
    slashes are judged too, since a server that decodes `%2F` first would climb there."""
    if len(raw_path) > MAX_PATH_LENGTH:
        raise InvalidProxyPath()
    if raw_path in ("", "/"):
        return ProxyPath(())
    if not raw_path.startswith("/"):
        raise InvalidProxyPath()
    raw_segments = raw_path[1:].split("/")
    trailing = len(raw_segments) > 1 and raw_segments[-1] == ""
    if trailing:
        raw_segments.pop()
    segments = []
    for raw in raw_segments:
        try:
            segment = unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidProxyPath() from None
        if "\\" in segment or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in segment):
            raise InvalidProxyPath()
        if _climbs(segment) or any(_climbs(part) for part in segment.split("/")):
            raise InvalidProxyPath()
        segments.append(segment)
    return ProxyPath(tuple(segments), trailing)


def _prefix_segments(prefix: str) -> tuple[str, ...]:
    """A grant's path prefix as decoded segments (`/projects/group%2Fname`: two)."""
    return tuple(unquote(part) for part in prefix.strip("/").split("/") if part)


def grant_allows(found: GrantedSet, method: str, path: ProxyPath) -> bool:
    """Whether the grant allows `method` on `path`: a path prefix matches whole decoded
    segments (`/repos` allows `/repos` and `/repos/x`, never `/reposx`; `/projects/acme` never
    `/projects/acme%2Fother`)."""
    return method in found.methods and _under(found.paths, path)


def _under(prefixes: Iterable[str], path: ProxyPath) -> bool:
    """Whether `path` is under one of the path prefixes, whole decoded segment by segment."""
    for prefix in prefixes:
        wanted = _prefix_segments(prefix)
        if path.segments[: len(wanted)] == wanted:
            return True
    return False


def prefix_within(prefix: str, prefixes: Iterable[str]) -> bool:
    """Whether a grant's path prefix covers no path outside `prefixes`: it is one of them or
    lies under one, whole decoded segment by segment (`/repos/x` lies within `/repos`)."""
    wanted = _prefix_segments(prefix)
    return any(wanted[: len(outer)] == outer for outer in map(_prefix_segments, prefixes))


def rule_allows(rule: Mapping[str, Any], method: str, path: ProxyPath) -> bool:
    """Whether an `approve` rule (`{"methods"?, "paths"?}`) covers `method` on `path`: a rule
    without methods covers every method, without paths every path; its prefixes match as a
    grant's do."""
    methods = rule.get("methods")
    if methods and method not in methods:
        return False
    prefixes = rule.get("paths")
    return not prefixes or _under(prefixes, path)
