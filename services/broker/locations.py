"""The provider's own addresses in an answer, moved onto the proxy: a `Location`,
`Content-Location` or `Link` value that points under the service's API base is rewritten to the
same place under the URL at which the agent reaches the service through credvault, so that an
SDK's next page or a redirect stays on credvault (and never carries the agent token to the
provider). Any other value passes unchanged.

`https://api.github.com/user/repos?page=2` becomes
`https://credvault.example/api/v1/agent/proxy/github/user/repos?page=2`; a reference by path
alone (`/user/repos?page=2`), which the agent would resolve against credvault's host, moves the
same way; a relative one (`repos?page=2`) already resolves under the proxy and is left alone.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

REWRITTEN_HEADERS = frozenset({"location", "content-location", "link"})
# A Link value's URI references: `<https://...>; rel="next", <...>; rel="last"`.
_LINK_TARGET = re.compile(r"<([^>]*)>")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def onto_proxy(
    headers: list[tuple[str, str]], *, api_base: str, proxy_url: str
) -> list[tuple[str, str]]:
    """`headers` with each address under `api_base` moved under `proxy_url` (no change when
    `proxy_url` is empty)."""
    if not proxy_url:
        return headers
    base = _Base(api_base)
    moved = []
    for name, value in headers:
        lower = name.lower()
        if lower == "link":
            value = _LINK_TARGET.sub(lambda match: f"<{base.moved(match[1], proxy_url)}>", value)
        elif lower in REWRITTEN_HEADERS:
            value = base.moved(value.strip(), proxy_url)
        moved.append((name, value))
    return moved


class _Base:
    """The service's API base: scheme, host, port and path."""

    __slots__ = ("host", "path", "port", "scheme")

    def __init__(self, api_base: str) -> None:
        parts = urlsplit(api_base)
        self.scheme = parts.scheme.lower()
        self.host = (parts.hostname or "").lower()
        self.port = parts.port or _DEFAULT_PORTS.get(self.scheme)
        self.path = parts.path.rstrip("/")

    def moved(self, reference: str, proxy_url: str) -> str:
        """`reference` under `proxy_url` when it points under the base, else as it is."""
        rest = self._below(reference)
        return reference if rest is None else proxy_url + rest

    def _below(self, reference: str) -> str | None:
        """What follows the base in `reference` (its path below the base, query, fragment),
        or None when it does not point under the base."""
        if reference.startswith("//"):
            reference = f"{self.scheme}:{reference}"
        elif reference.startswith("/"):
            return self._below_path(reference)
        try:
            parts = urlsplit(reference)
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
        except ValueError:  # a port that is not a number
            return None
        if (parts.scheme.lower(), (parts.hostname or "").lower(), port) != (
            self.scheme,
            self.host,
            self.port,
        ):
            return None
        return self._below_path(reference[len(parts.scheme) + 3 + len(parts.netloc) :])

    def _below_path(self, target: str) -> str | None:
        """`target` (a path with its query and fragment) less the base path, when it is under
        it."""
        if not target.startswith(self.path):
            return None
        rest = target[len(self.path) :]
        if rest and rest[0] not in "/?#":
            return None  # `/v10` is not under `/v1`
        return rest
