"""Identifiers: service identifiers, keyNames and keyTypes. The one definition of
each rule: the catalog checks its entries with them, the account API its input, the OpenAPI
document states them."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

SERVICE_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,62}[a-z0-9])?")
KEY_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
KEY_NAME_SCHEMA_PATTERN = f"^{KEY_NAME_PATTERN.pattern}$"
KEY_NAME_RULE = "Must be lowercase snake case: a-z first, then a-z, 0-9 or _, at most 64."
_SEPARATOR_RUN = re.compile(r"[\s_]+")

API_KEY, OAUTH = "api_key", "oauth"
KEY_TYPES = (API_KEY, OAUTH)
# A set holding either is an OAuth set.
OAUTH_MARKERS = frozenset({"access_token", "refresh_token"})
OAUTH_MARKERS_TEXT = " or ".join(sorted(OAUTH_MARKERS))
SERVICE_RULE = (
    "1 to 64 characters of a-z, 0-9, '.' and '-' after normalization, starting and ending "
    "with a letter or digit"
)
# What `normalize_service` does, for the documents that describe the accepted input.
NORMALIZATION_RULE = (
    "Normalized by Unicode NFKC, trimming surrounding whitespace, lowercasing and turning each "
    "run of whitespace or _ into one -"
)


class InvalidIdentifier(ValueError):
    """The text cannot be normalized into a service identifier. Never holds the text."""


def normalize_service(raw: str) -> str:
    """Return the normalized service identifier of `raw`, or raise InvalidIdentifier.

    NFKC, strip surrounding whitespace, lowercase, each run of whitespace or `_` becomes one `-`;
    the result must then match SERVICE_PATTERN entirely (1 to 64 ASCII characters).
    """
    text = unicodedata.normalize("NFKC", raw).strip().lower()
    text = _SEPARATOR_RUN.sub("-", text)
    if not SERVICE_PATTERN.fullmatch(text):
        raise InvalidIdentifier("not a valid service identifier")
    return text


def key_type_for(key_names: Iterable[str]) -> str:
    """`oauth` when the set holds an access or refresh token, otherwise `api_key`."""
    return OAUTH if OAUTH_MARKERS.intersection(key_names) else API_KEY


# A service's other bases (providers with more than one host): the proxy reaches one at
# `{service}~{base}/{path}`, and a host its provider's pattern matches at
# `{service}~host/{host}/{path}`. `~` is in no service identifier, so the split is exact.
BASE_SEPARATOR = "~"
HOST_BASE = "host"
BASE_NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,31}")
BASE_NAME_RULE = "1 to 32 characters of a-z, 0-9 and '-', starting with a letter"


def split_base(segment: str) -> tuple[str, str | None]:
    """The proxy path's service segment as (service, base): `github` is ("github", None),
    `huggingface~router` ("huggingface", "router"), `github~` ("github", "")."""
    service, separator, base = segment.partition(BASE_SEPARATOR)
    return service, base if separator else None
