"""A provider's sensitive endpoints: the methods and paths of its API that create, reveal or
widen a credential (API keys, personal or app tokens, OAuth authorizations, deploy keys, admin
keys, webhooks that would carry secrets). A brokered call to one is refused unless the agent's
grant names that path, or a longer one, explicitly: a default grant (`/`) never mints a
credential that would outlive the agent.

In the catalog, each provider either lists them or says why it has none:

    [[providers.sensitive]]
    methods = ["POST"]                      # optional: every method
    path = "/repos/*/*/keys"                # segments; `*` matches within one segment
    why = "deploy keys: an SSH key added here reads and writes the repository"
    docs = "https://docs.github.com/en/rest/deploy-keys/deploy-keys"

    sensitive_none = "why the API has no such endpoint, with the page that says so"

Every provider credvault ships gives one or the other: an empty list is a decision written in
the entry, never an entry nobody considered. An operator's entry (CREDVAULT_EXTRA_CATALOG) may
leave both out: its API is the operator's own, and so is the judgement of its endpoints.

A path pattern matches a request's path, and everything below it, segment by segment, without
regard to case (a provider that matches paths without case must not offer a way around it),
each segment judged by its part before a `;` (servers that drop path parameters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
SENSITIVE_KEYS = {"methods", "path", "why", "docs"}


class SensitiveError(ValueError):
    """An invalid `sensitive` entry: the message names the field."""


def _segments(path: str) -> list[str]:
    return [segment.split(";", 1)[0].lower() for segment in path.strip("/").split("/") if segment]


def path_covers(pattern: str, path: str) -> bool:
    """Whether a catalog path pattern covers `path` or a path below it: segment by segment,
    without regard to case, `*` matching within one segment, each segment judged by its part
    before a `;`."""
    wanted = _segments(pattern)
    segments = _segments(path)
    return len(segments) >= len(wanted) and all(
        fnmatchcase(segment, part) for segment, part in zip(segments, wanted, strict=False)
    )


@dataclass(frozen=True, slots=True)
class SensitiveEndpoint:
    methods: tuple[str, ...]
    path: str
    why: str
    docs: str

    def _covers(self, path: str) -> bool:
        return path_covers(self.path, path)

    def matches(self, method: str, path: str) -> bool:
        """Whether a call of `method` on the decoded `path` reaches this endpoint."""
        return method in self.methods and self._covers(path)

    def named_by(self, prefix: str) -> bool:
        """Whether a grant's path prefix names this endpoint (or a path below it) explicitly."""
        return self._covers(prefix)


def parse_sensitive(
    raw: Mapping[str, Any], where: str, *, operator: bool = False
) -> tuple[tuple[SensitiveEndpoint, ...], str]:
    """A provider entry's `sensitive` list and its `sensitive_none` reason. Raises
    SensitiveError naming the field.

    A built-in entry must give exactly one: at least one `sensitive` entry, or a `sensitive_none`
    sentence saying why the API has none. An operator's entry (`operator`: loaded from
    CREDVAULT_EXTRA_CATALOG) may give neither, since its API is the operator's own."""
    entries = raw.get("sensitive", [])
    none = raw.get("sensitive_none", "")
    if not isinstance(entries, list):
        raise SensitiveError("`sensitive` must be a list of tables")
    if not isinstance(none, str) or ("sensitive_none" in raw and not none.strip()):
        raise SensitiveError("`sensitive_none` must be a sentence")
    if entries and none:
        raise SensitiveError("give `sensitive` or `sensitive_none`, not both")
    if not entries and not none and not operator:
        raise SensitiveError(
            "list the endpoints that create, reveal or widen a credential in `sensitive`, "
            "or say why there are none in `sensitive_none`"
        )
    return tuple(_parse_entry(entry, f"sensitive[{i}]") for i, entry in enumerate(entries)), none


def _parse_entry(entry: Any, where: str) -> SensitiveEndpoint:
    if not isinstance(entry, dict):
        raise SensitiveError(f"{where} must be a table")
    unknown = sorted(set(entry) - SENSITIVE_KEYS)
    if unknown:
        raise SensitiveError(f"{where}: unknown field {unknown[0]!r}")
    methods = entry.get("methods", list(METHODS))
    if (
        not isinstance(methods, list)
        or not methods
        or any(method not in METHODS for method in methods)
    ):
        raise SensitiveError(f"{where}: `methods` must list some of {', '.join(METHODS)}")
    path = entry.get("path")
    if not isinstance(path, str) or not path.startswith("/") or not _segments(path):
        raise SensitiveError(f"{where}: `path` must start with '/' and name a segment")
    for name in ("why", "docs"):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise SensitiveError(f"{where}: `{name}` is required")
    if not entry["docs"].startswith("https://"):
        raise SensitiveError(f"{where}: `docs` must be an https URL")
    return SensitiveEndpoint(tuple(methods), path, entry["why"], entry["docs"])


def refused(
    endpoints: Sequence[SensitiveEndpoint], *, method: str, path: str, prefixes: Sequence[str]
) -> SensitiveEndpoint | None:
    """The sensitive endpoint a call of `method` on `path` reaches without a grant prefix that
    names it, or None."""
    for endpoint in endpoints:
        if endpoint.matches(method, path) and not any(map(endpoint.named_by, prefixes)):
            return endpoint
    return None
