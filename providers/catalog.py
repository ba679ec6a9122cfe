"""The provider catalog: `catalog.toml` beside this module, read with the standard library and
validated when the app loads. An invalid entry raises CatalogError naming the entry and field.

Providers know nothing of accounts or HTTP views: a provider is data, and `verification.py`
turns one of its checks into one HTTP request and a verdict.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

CATALOG_PATH = Path(__file__).with_name("catalog.toml")

_ID = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,62}[a-z0-9])?")
_KEY_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")
KEY_TYPES = ("api_key", "oauth")
METHODS = ("GET", "POST")
AUTH_TYPES = ("bearer", "header", "basic")


class CatalogError(ImproperlyConfigured):
    """The catalog file is invalid; the message names the entry and the field."""


@dataclass(frozen=True)
class Auth:
    """Where the credential goes: `bearer`, a named `header` with a prefix, or `basic`."""

    type: str
    field: str = ""
    header: str = ""
    prefix: str = ""
    username: str = ""
    password: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        if self.type == "basic":
            return tuple(f for f in (self.username, self.password) if f)
        return (self.field,)


@dataclass(frozen=True)
class Check:
    method: str
    path: str
    auth: Auth
    headers: Mapping[str, str]
    docs: str
    accept_json: tuple[str, Any] | None = None


@dataclass(frozen=True)
class Shape:
    key_type: str
    required: frozenset[str]
    optional: frozenset[str]
    check: Check | None

    @property
    def known(self) -> frozenset[str]:
        return self.required | self.optional


@dataclass(frozen=True)
class ShapeMatch:
    """The shape a set of keyNames matches, or what is missing or unexpected for the closest."""

    shape: Shape | None
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()


@dataclass(frozen=True)
class Provider:
    id: str
    name: str
    base_url: str
    shapes: tuple[Shape, ...] = field(default_factory=tuple)

    def match(self, key_names: Iterable[str]) -> ShapeMatch:
        names = frozenset(key_names)
        best: ShapeMatch | None = None
        for shape in self.shapes:
            missing = tuple(sorted(shape.required - names))
            unexpected = tuple(sorted(names - shape.known))
            if not missing and not unexpected:
                return ShapeMatch(shape)
            candidate = ShapeMatch(None, missing, unexpected)
            if best is None or len(missing) + len(unexpected) < len(best.missing) + len(
                best.unexpected
            ):
                best = candidate
        return best or ShapeMatch(None)


def _fail(where: str, message: str) -> CatalogError:
    return CatalogError(f"{CATALOG_PATH.name}: {where}: {message}")


def _str(entry: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = entry.get(key, "" if not required else None)
    if not isinstance(value, str) or (required and not value):
        raise _fail(where, f"`{key}` must be a non-empty string")
    return value


def _key_names(entry: Mapping[str, Any], key: str, where: str) -> frozenset[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _KEY_NAME.fullmatch(v) for v in value
    ):
        raise _fail(where, f"`{key}` must be a list of keyNames (lowercase snake case)")
    return frozenset(value)


def _parse_auth(raw: Any, where: str) -> Auth:
    if not isinstance(raw, dict) or raw.get("type") not in AUTH_TYPES:
        raise _fail(where, f"`auth.type` must be one of {', '.join(AUTH_TYPES)}")
    kind = raw["type"]
    if kind == "basic":
        return Auth(
            type=kind,
            username=_str(raw, "username", f"{where} auth"),
            password=_str(raw, "password", f"{where} auth", required=False),
        )
    header = ""
    if kind == "header":
        header = _str(raw, "name", f"{where} auth")
        if not _HEADER_NAME.fullmatch(header):
            raise _fail(where, "`auth.name` must be a header name")
    return Auth(
        type=kind,
        field=_str(raw, "field", f"{where} auth"),
        header=header,
        prefix=_str(raw, "prefix", f"{where} auth", required=False),
    )


def _parse_check(raw: Any, where: str, known: frozenset[str]) -> Check:
    if not isinstance(raw, dict):
        raise _fail(where, "`check` must be a table")
    method = raw.get("method")
    if method not in METHODS:
        raise _fail(where, f"`check.method` must be one of {', '.join(METHODS)}")
    path = _str(raw, "path", where)
    if not path.startswith("/") or "?" in path or "#" in path:
        raise _fail(where, "`check.path` must start with / and hold no query or fragment")
    auth = _parse_auth(raw.get("auth"), where)
    for name in auth.fields:
        if name not in known:
            raise _fail(where, f"`auth` uses keyName {name!r}, which the shape does not name")
    headers = raw.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and _HEADER_NAME.fullmatch(k) and isinstance(v, str)
        for k, v in headers.items()
    ):
        raise _fail(where, "`check.headers` must map header names to strings")
    accept = raw.get("accept_json")
    accept_json = None
    if accept is not None:
        if not isinstance(accept, dict) or set(accept) != {"member", "equals"}:
            raise _fail(where, "`check.accept_json` must be { member = ..., equals = ... }")
        accept_json = (_str(accept, "member", where), accept["equals"])
    docs = _str(raw, "docs", where)
    if urlsplit(docs).scheme != "https":
        raise _fail(where, "`check.docs` must be an https URL")
    return Check(
        method=method,
        path=path,
        auth=auth,
        headers=dict(headers),
        docs=docs,
        accept_json=accept_json,
    )


def _parse_provider(raw: Any, position: int) -> Provider:
    where = f"providers[{position}]"
    if not isinstance(raw, dict):
        raise _fail(where, "must be a table")
    provider_id = _str(raw, "id", where)
    if not _ID.fullmatch(provider_id):
        raise _fail(where, "`id` must be a normalized service identifier")
    where = f"provider {provider_id!r}"
    name = _str(raw, "name", where)
    base_url = _str(raw, "base_url", where)
    parts = urlsplit(base_url)
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.username:
        raise _fail(where, "`base_url` must be a fixed https URL without query or user info")
    raw_shapes = raw.get("shapes")
    if not isinstance(raw_shapes, list) or not raw_shapes:
        raise _fail(where, "`shapes` must list at least one credential shape")
    shapes = []
    for index, raw_shape in enumerate(raw_shapes):
        shape_where = f"{where} shapes[{index}]"
        if not isinstance(raw_shape, dict) or raw_shape.get("key_type") not in KEY_TYPES:
            raise _fail(shape_where, f"`key_type` must be one of {', '.join(KEY_TYPES)}")
        required = _key_names(raw_shape, "required", shape_where)
        optional = _key_names(raw_shape, "optional", shape_where)
        if not required:
            raise _fail(shape_where, "`required` must name at least one keyName")
        check = None
        if "check" in raw_shape:
            check = _parse_check(raw_shape["check"], shape_where, required | optional)
        shapes.append(Shape(raw_shape["key_type"], required, optional, check))
    return Provider(id=provider_id, name=name, base_url=base_url, shapes=tuple(shapes))


def parse_catalog(text: str) -> dict[str, Provider]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{CATALOG_PATH.name}: not valid TOML: {exc}") from None
    entries = data.get("providers")
    if not isinstance(entries, list):
        raise CatalogError(f"{CATALOG_PATH.name}: no [[providers]] entries")
    providers: dict[str, Provider] = {}
    for position, raw in enumerate(entries):
        provider = _parse_provider(raw, position)
        if provider.id in providers:
            raise _fail(f"provider {provider.id!r}", "`id` appears twice")
        providers[provider.id] = provider
    return providers


@lru_cache(maxsize=1)
def catalog() -> dict[str, Provider]:
    """Every provider of the catalog, by id (read once)."""
    return parse_catalog(CATALOG_PATH.read_text(encoding="utf-8"))


def get(provider_id: str) -> Provider | None:
    return catalog().get(provider_id)
