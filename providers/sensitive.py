"""A provider's sensitive endpoints: the methods and paths of its API that create, reveal or
widen a credential. A brokered call to one is refused unless the agent's grant names that path,
or a longer one, explicitly: a default grant (`/`) never mints a credential that would outlive
the agent.

Every provider credvault ships lists them or says why it has none (`sensitive_none`); an
operator's entry may leave both out. How a pattern matches (segments, `*`, `**`, `exact`, case,
`;`, an encoded `/` read both ways) is told in docs/providers.md#sensitive-endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import unquote

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
SENSITIVE_KEYS = {"methods", "path", "why", "docs", "exact"}


class SensitiveError(ValueError):
    """An invalid `sensitive` entry: the message names the field."""


def _judged(segments: Sequence[str]) -> list[str]:
    return [segment.split(";", 1)[0].lower() for segment in segments if segment]


def _segments(path: str) -> list[str]:
    return _judged(path.strip("/").split("/"))


def _starts(pattern: Sequence[str], segments: Sequence[str], *, whole: bool = False) -> bool:
    """Whether `segments` begin with what `pattern` matches (what lies below is covered), or,
    `whole`, are exactly what it matches. The positions the pattern can have reached are kept
    as a set, so that a long path costs at most one match per segment and part, whatever the
    `**`s."""
    reached = {0}
    for part in pattern:
        if not reached:
            return False
        if part == "**":
            reached = set(range(min(reached), len(segments) + 1))
        else:
            reached = {
                i + 1 for i in reached if i < len(segments) and fnmatchcase(segments[i], part)
            }
    return len(segments) in reached if whole else bool(reached)


def path_covers(pattern: str, path: str) -> bool:
    """Whether a catalog path pattern covers `path` or a path below it: segment by segment,
    without regard to case, `*` matching within one segment and `**` any number of them, each
    segment judged by its part before a `;`."""
    return _starts(_segments(pattern), _segments(path))


@dataclass(frozen=True, slots=True)
class SensitiveEndpoint:
    methods: tuple[str, ...]
    path: str
    why: str
    docs: str
    exact: bool = False

    def _covers(self, segments: Sequence[str]) -> bool:
        return _starts(_segments(self.path), segments, whole=self.exact)

    def matches(self, method: str, path: str, segments: Sequence[str] = ()) -> bool:
        """Whether a call of `method` on the decoded `path` reaches this endpoint, `path`'s
        decoded `segments` (an encoded `/` kept inside its segment) read as well."""
        readings = [_segments(path)] + ([_judged(segments)] if segments else [])
        return method in self.methods and any(map(self._covers, readings))

    def named_by(self, prefix: str) -> bool:
        """Whether a grant's path prefix names this endpoint (or a path below it) explicitly,
        read both ways an encoded `/` can be read, as a request's path is."""
        parts = prefix.strip("/").split("/")
        readings = [_segments(unquote(prefix)), _judged([unquote(part) for part in parts])]
        return any(map(self._covers, readings))


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
    exact = entry.get("exact", False)
    if not isinstance(exact, bool):
        raise SensitiveError(f"{where}: `exact` must be true or false")
    return SensitiveEndpoint(tuple(methods), path, entry["why"], entry["docs"], exact)


def refused(
    endpoints: Sequence[SensitiveEndpoint],
    *,
    method: str,
    path: str,
    prefixes: Sequence[str],
    segments: Sequence[str] = (),
) -> SensitiveEndpoint | None:
    """The sensitive endpoint a call of `method` on `path` (decoded; its decoded `segments`, an
    encoded `/` kept inside its segment, where the caller has them) reaches without a grant
    prefix that names it, or None."""
    for endpoint in endpoints:
        if endpoint.matches(method, path, segments) and not any(map(endpoint.named_by, prefixes)):
            return endpoint
    return None
