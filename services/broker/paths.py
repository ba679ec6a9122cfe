"""The brokered call's path: checked before anything is sent, encoded again as it is sent, and
matched against a grant's methods and path prefixes."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_to_bytes

from services.exceptions import InvalidProxyPath
from services.storage.queries import GrantedSet

MAX_PATH_LENGTH = 2048
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
# What a path segment may hold unencoded when it is sent on (RFC 3986 pchar, less `@`).
_PATH_SAFE = "/!$&'()*+,;=:-._~"


def checked_path(raw_path: str) -> str:
    """The path after its one percent-decoding, or InvalidProxyPath.

    After one percent-decoding it holds no `.` or `..` segment, no empty segment (a single
    trailing slash excepted: `/repos/`), no backslash, no control character and no `@`; an
    encoded `/` or `\\` (`%2F`, `%5C`), which would change the segments the provider sees, is
    refused as well. A segment is judged by its part before a `;` too, since servers such as
    Tomcat and Jetty drop path parameters before they resolve the path: `..;x` climbs there as
    `..` does, and `;x` is an empty segment. It is sent encoded again (`encoded`), so a
    decoded `%2e` goes as `%252e`."""
    if len(raw_path) > MAX_PATH_LENGTH or _ENCODED_SEPARATOR.search(raw_path):
        raise InvalidProxyPath()
    try:
        decoded = unquote_to_bytes(raw_path or "/").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidProxyPath() from None
    if not decoded.startswith("/") or "\\" in decoded or "@" in decoded:
        raise InvalidProxyPath()
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in decoded):
        raise InvalidProxyPath()
    segments = decoded[1:].split("/")
    if segments[-1] == "" and len(segments) > 1:
        segments.pop()  # one trailing slash
    if decoded != "/" and any(segment.split(";", 1)[0] in ("", ".", "..") for segment in segments):
        raise InvalidProxyPath()
    return decoded


def encoded(path: str) -> str:
    """A decoded path as it is sent: every character outside a path segment's own set, `%`
    included, percent-encoded."""
    return quote(path, safe=_PATH_SAFE)


def grant_allows(found: GrantedSet, method: str, path: str) -> bool:
    """Whether the grant allows `method` on the decoded `path`: a path prefix matches whole
    segments (`/repos` allows `/repos` and `/repos/x`, never `/reposx`)."""
    if method not in found.methods:
        return False
    return any(
        prefix == "/" or path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/")
        for prefix in found.paths
    )
