"""Identifiers of the account API: service identifiers, keyNames and keyTypes (CONTRACT 3)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

SERVICE_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,62}[a-z0-9])?")
# The normalized form, as the OpenAPI document states it (the API also normalizes other input).
SERVICE_SCHEMA_PATTERN = f"^{SERVICE_PATTERN.pattern}$"
KEY_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SEPARATOR_RUN = re.compile(r"[\s_]+")

OAUTH_MARKERS = frozenset({"access_token", "refresh_token"})
SERVICE_RULE = (
    "1 to 64 characters of a-z, 0-9, '.' and '-' after normalization, starting and ending "
    "with a letter or digit"
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


def is_key_name(name: str) -> bool:
    return KEY_NAME_PATTERN.fullmatch(name) is not None


def key_type_for(key_names: Iterable[str]) -> str:
    """`oauth` when the set holds an access or refresh token, otherwise `api_key`."""
    return "oauth" if OAUTH_MARKERS.intersection(key_names) else "api_key"
