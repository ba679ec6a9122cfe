"""The provider catalog: `catalog.toml` beside this module, read with the standard library and
validated when the app loads. An invalid entry raises CatalogError naming the entry and field.

Providers know nothing of accounts or HTTP views: a provider is data, and `verification.py`
turns one of its checks into one HTTP request and a verdict.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from providers.graphql_operations import GraphQLEndpoint, GraphQLEntryError, parse_graphql
from providers.identifiers import (
    API_KEY,
    BASE_NAME_PATTERN,
    BASE_NAME_RULE,
    HOST_BASE,
    KEY_NAME_PATTERN,
    KEY_TYPES,
    OAUTH,
    OAUTH_MARKERS,
    OAUTH_MARKERS_TEXT,
    SERVICE_PATTERN,
)
from providers.sensitive import SensitiveEndpoint, SensitiveError, parse_sensitive

CATALOG_PATH = Path(__file__).with_name("catalog.toml")

_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")
METHODS = ("GET", "POST")
AUTH_TYPES = ("bearer", "header", "basic", "url")
CATEGORIES = ("ai", "developer", "messaging", "commerce", "identity", "productivity")
PER_CUSTOMER = "per_customer"
# The optional keyNames of an OAuth shape that names none.
OAUTH_OPTIONAL = frozenset(
    {"refresh_token", "token_type", "expires_at", "scope", "client_id", "client_secret", "id_token"}
)
PROVIDER_KEYS = {
    "id",
    "name",
    "category",
    "base_url",
    "host",
    "base_url_example",
    "note",
    "shapes",
    "oauth",
    "api_host_field",
    "api_host_patterns",
    "sensitive",
    "sensitive_none",
    "fields",
    "bases",
    "host_pattern",
    "answer_urls",
    "graphql",
}
# What a `[providers.fields]` entry may say of a keyName.
FIELD_KEYS = {"secret"}
# keyNames that are secrets by what they are, whatever an entry declares.
ALWAYS_SECRET = OAUTH_MARKERS | {"client_secret", "id_token"}
# What `answer_urls` may say: the provider's JSON answers carry absolute URLs of its own API.
ANSWER_URLS = ("json",)
OAUTH_KEYS = {
    "authorize_url",
    "token_url",
    "refresh_url",
    "scopes",
    "scope_separator",
    "pkce",
    "client_auth",
    "rotates_refresh_tokens",
    "authorize_params",
    "docs",
}
CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post")
CHECK_KEYS = {
    "method",
    "path",
    "auth",
    "headers",
    "accept_json",
    "body",
    "content_type",
    "read_only",
    "credential_in_url",
    "docs",
}
_PLACEHOLDER = re.compile(rf"\{{({KEY_NAME_PATTERN.pattern})\}}")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})+")
_ONE_LABEL = re.compile(_LABEL)
# A connection's API host as a set may name it: https, a DNS name, nothing else (the
# default port at most, a trailing slash at most).
_API_HOST_VALUE = re.compile(rf"https://({_LABEL}(?:\.{_LABEL})+)(?::443)?/?", re.IGNORECASE)


class CatalogError(ImproperlyConfigured):
    """The catalog file is invalid; the message names the entry and the field."""


@dataclass(frozen=True)
class Auth:
    """Where the credential goes: `bearer`, a named `header` with a prefix, `basic` (from
    named fields, or a fixed username and a field), or `url` (in the path: flagged checks only).
    """

    type: str
    field: str = ""
    header: str = ""
    prefix: str = ""
    username: str = ""
    username_value: str = ""
    password: str = ""
    # Those of `fields` that are identifiers (Twilio's Account SID, an Atlassian e-mail
    # address beside its API token): placed like the rest, never redacted.
    identifiers: frozenset[str] = frozenset()

    @property
    def fields(self) -> tuple[str, ...]:
        if self.type == "basic":
            return tuple(f for f in (self.username, self.password) if f)
        return (self.field,)

    @property
    def credential(self) -> str:
        """The keyName of the value that authenticates: a basic pair's password (its user
        name when it has none), else the one field."""
        if self.type == "basic":
            return self.password or self.username
        return self.field


@dataclass(frozen=True)
class JsonCondition:
    """A 2xx counts only when the JSON member at `member` (dotted path) equals `equals`, or,
    with `present`, exists and is not null."""

    member: str
    equals: Any = None
    present: bool = False

    def holds(self, document: Any) -> bool:
        value = document
        for step in self.member.split("."):
            if not isinstance(value, dict) or step not in value:
                return False
            value = value[step]
        if self.present:
            return value is not None
        return value == self.equals and type(value) is type(self.equals)


@dataclass(frozen=True)
class Check:
    method: str
    path: str
    auth: Auth
    headers: Mapping[str, str]
    docs: str
    accept_json: JsonCondition | None = None
    body: str | None = None
    content_type: str = "application/json"
    read_only: str = ""
    credential_in_url: bool = False
    # The identifiers whose values fill the path's placeholders (Twilio's Account SID, which
    # every URL of its API names): each sent percent-encoded as one segment. Not a key of the
    # file: the placeholders of the path that name identifiers.
    path_fields: frozenset[str] = frozenset()


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
class OAuth:
    """How a person connects the provider in a browser: the authorization and
    token URLs (fixed https hosts), the default scopes, whether the provider takes PKCE, how the
    client authenticates at the token URL, and whether a refresh replaces the refresh token."""

    authorize_url: str
    token_url: str
    scopes: tuple[str, ...]
    scope_separator: str
    pkce: bool
    client_auth: str
    rotates_refresh_tokens: bool
    authorize_params: Mapping[str, str]
    docs: str
    # Where refreshes go, for a provider with a refresh endpoint of its own (Figma); else the
    # token URL.
    refresh_url: str = ""


@dataclass(frozen=True)
class ApiHost:
    """A connection's own API host, named by one field of its set (Salesforce's
    `instance_url`, Pipedrive's `api_domain`, as their token answers carry them). It is the
    connection's base URL only when it is `https://` and a DNS name matching one of
    `patterns` (`*.my.salesforce.com`: one or more labels, then the rest as written), with
    no port but 443, path, query or user info."""

    field: str
    patterns: tuple[str, ...]

    def base_url(self, value: str) -> str | None:
        """`https://<host>` of an acceptable value, else None."""
        found = _API_HOST_VALUE.fullmatch(value)
        if found is None:
            return None
        host = found.group(1).lower()
        return f"https://{host}" if any(_host_matches(p, host) for p in self.patterns) else None

    @property
    def rule(self) -> str:
        """The rule in words, for an error message (never the refused value)."""
        return f"an https URL whose host matches {' or '.join(self.patterns)}"


@dataclass(frozen=True)
class HostPattern:
    """The hosts a call may choose for a provider (`host_pattern`: Pinecone's per-index
    `*.svc.*.pinecone.io`), each `*` exactly one label; the rule is told in
    docs/providers.md#providers-with-more-than-one-host. The calls go to `https://{host}`, or,
    where the server's configuration gives the pattern as a URL (`http://*.svc.internal:8443`),
    with its scheme and port."""

    pattern: str
    scheme: str = "https"
    port: int | None = None

    def matches(self, host: str) -> bool:
        labels = host.lower().split(".")
        wanted = self.pattern.split(".")
        return (
            len(host) <= 253
            and len(labels) == len(wanted)
            and all(
                _ONE_LABEL.fullmatch(label) if want == "*" else label == want
                for label, want in zip(labels, wanted, strict=True)
            )
        )

    def url(self, host: str) -> str:
        """The base URL of calls to `host` (a host the pattern matched)."""
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{host.lower()}{port}"

    @property
    def text(self) -> str:
        """As written: the pattern, or the configured URL form."""
        return self.url(self.pattern) if self.scheme != "https" or self.port else self.pattern


def parse_host_pattern(text: Any, *, url_form: bool = False) -> HostPattern:
    """A host pattern (`HostPattern`), or ValueError saying the rule. With `url_form` (the
    server's own configuration) it may be written as an http(s) URL with a port, no path."""
    if not isinstance(text, str):
        raise ValueError("a host pattern is a string")
    scheme, port = "https", None
    if url_form and "://" in text:
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise ValueError("a host pattern's URL has a port that is not a number") from None
        if (
            parts.scheme not in ("http", "https")
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or "@" in parts.netloc
        ):
            raise ValueError("a host pattern's URL is http(s)://PATTERN[:PORT], nothing more")
        scheme, text = parts.scheme, parts.netloc.rsplit(":", 1)[0] if port else parts.netloc
    labels = text.split(".")
    literal_tail = 0
    for label in reversed(labels):
        if label == "*":
            break
        literal_tail += 1
    if (
        "*" not in labels
        or literal_tail < 2
        or not all(label == "*" or _ONE_LABEL.fullmatch(label) for label in labels)
    ):
        raise ValueError(
            "a host pattern is lowercase DNS labels joined by dots, each a label or `*` (one "
            "label), with at least one `*` and two labels after the last"
        )
    return HostPattern(text, scheme, port)


def _host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


@dataclass(frozen=True)
class Provider:
    """A provider. `base_url` is None for a per-customer host (a shop's or a site's own
    domain): its checks run only against a base URL the operator configured server-side."""

    id: str
    name: str
    category: str
    base_url: str | None
    shapes: tuple[Shape, ...] = field(default_factory=tuple)
    base_url_example: str = ""
    note: str = ""
    oauth: OAuth | None = None
    api_host: ApiHost | None = None
    # The endpoints that create, reveal or widen a credential (providers/sensitive.py), or why
    # there are none.
    sensitive: tuple[SensitiveEndpoint, ...] = ()
    sensitive_none: str = ""
    # Its GraphQL endpoint and the mutations there that create, reveal or widen a credential
    # (providers/graphql_operations.py), for a provider whose API is GraphQL.
    graphql: GraphQLEndpoint | None = None
    # Added by the operator (CREDVAULT_EXTRA_CATALOG): its host comes from the server's own
    # configuration, so the outbound client may connect to a private address for it.
    operator: bool = False
    # The keyNames declared `secret = false` in `[providers.fields]`: values that name an
    # account or a host (Twilio's `account_sid`, Jira's `email`, Salesforce's
    # `instance_url`), which the provider's answers and URLs carry. Every other field is a
    # secret.
    identifiers: frozenset[str] = frozenset()
    # Its other API bases by name (`router`: Hugging Face's inference router), reached at
    # `{service}~{name}/...`, and the pattern of the hosts a call may name at
    # `{service}~host/{host}/...`.
    bases: Mapping[str, str] = field(default_factory=dict)
    host_pattern: HostPattern | None = None

    @property
    def base_names(self) -> tuple[str, ...]:
        """What a call or a grant may name after `~`: each base, then `host` with a pattern."""
        return (*self.bases, *((HOST_BASE,) if self.host_pattern is not None else ()))

    # `json` when its JSON answers carry absolute URLs of its API (a next page's): brokered
    # answers have them moved onto the proxy (services/broker/locations.py).
    answer_urls: str = ""

    @property
    def per_customer(self) -> bool:
        return self.base_url is None

    @property
    def placement_headers(self) -> tuple[tuple[str, str], ...]:
        """The named headers its credential placements use, with their prefixes: where an SDK
        of the provider puts its key (`x-api-key`, `PRIVATE-TOKEN`, `Authorization: Bot `)."""
        return tuple(
            dict.fromkeys(
                (shape.check.auth.header, shape.check.auth.prefix)
                for shape in self.shapes
                if shape.check is not None and shape.check.auth.type == "header"
            )
        )

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
    """An invalid entry; `parse_catalog` puts the file's name in front."""
    return CatalogError(f"{where}: {message}")


def _only(entry: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """A key the format does not know is an error (a typo would otherwise drop a rule)."""
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise _fail(where, f"unknown key `{unknown[0]}`")


def _str(entry: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = entry.get(key, "" if not required else None)
    if not isinstance(value, str) or (required and not value):
        raise _fail(where, f"`{key}` must be a non-empty string")
    return value


def _key_names(entry: Mapping[str, Any], key: str, where: str) -> frozenset[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(
        isinstance(v, str) and KEY_NAME_PATTERN.fullmatch(v) for v in value
    ):
        raise _fail(where, f"`{key}` must be a list of keyNames (lowercase snake case)")
    return frozenset(value)


def _parse_auth(raw: Any, where: str) -> Auth:
    if not isinstance(raw, dict) or raw.get("type") not in AUTH_TYPES:
        raise _fail(where, f"`auth.type` must be one of {', '.join(AUTH_TYPES)}")
    kind = raw["type"]
    _only(
        raw,
        {"type", "username", "username_value", "password"}
        if kind == "basic"
        else {"type", "name", "field", "prefix"},
        f"{where} auth",
    )
    if kind == "basic":
        username = _str(raw, "username", f"{where} auth", required=False)
        username_value = _str(raw, "username_value", f"{where} auth", required=False)
        password = _str(raw, "password", f"{where} auth", required=False)
        if bool(username) == bool(username_value):
            raise _fail(where, "basic `auth` takes `username` (a keyName) or `username_value`")
        if username_value and not password:
            raise _fail(where, "basic `auth` with `username_value` needs `password`")
        return Auth(type=kind, username=username, username_value=username_value, password=password)
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


def _parse_condition(raw: Any, where: str) -> JsonCondition | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("member"), str):
        raise _fail(where, "`check.accept_json` must name a `member`")
    if set(raw) == {"member", "equals"}:
        return JsonCondition(raw["member"], equals=raw["equals"])
    if set(raw) == {"member", "present"} and raw["present"] is True:
        return JsonCondition(raw["member"], present=True)
    raise _fail(where, "`check.accept_json` takes `member` with `equals` or `present = true`")


def _parse_check(
    raw: Any,
    where: str,
    required: frozenset[str],
    known: frozenset[str],
    identifiers: frozenset[str],
) -> Check:
    if not isinstance(raw, dict):
        raise _fail(where, "`check` must be a table")
    _only(raw, CHECK_KEYS, f"{where} check")
    method = raw.get("method")
    if method not in METHODS:
        raise _fail(where, f"`check.method` must be one of {', '.join(METHODS)}")
    read_only = _str(raw, "read_only", where, required=False)
    if method == "POST" and not read_only:
        raise _fail(
            where, "a POST check needs `read_only`: why the documented call changes nothing"
        )
    path = _str(raw, "path", where)
    if not path.startswith("/") or "?" in path or "#" in path:
        raise _fail(where, "`check.path` must start with / and hold no query or fragment")
    auth = _parse_auth(raw.get("auth"), where)
    for name in auth.fields:
        if name not in known:
            raise _fail(where, f"`auth` uses keyName {name!r}, which the shape does not name")
    if auth.credential in identifiers:
        raise _fail(
            where, f"`auth` places identifier {auth.credential!r} as the credential: a secret"
        )
    auth = replace(auth, identifiers=frozenset(auth.fields) & identifiers)
    in_url = raw.get("credential_in_url", False)
    if not isinstance(in_url, bool):
        raise _fail(where, "`check.credential_in_url` must be true or false")
    placeholders = _PLACEHOLDER.findall(path)
    path_fields = frozenset(name for name in placeholders if name in identifiers)
    if in_url and (auth.type != "url" or placeholders != [auth.field]):
        raise _fail(where, "`credential_in_url` takes `auth.type = url` and its one placeholder")
    if not in_url and (auth.type == "url" or not set(placeholders) <= identifiers):
        raise _fail(
            where,
            "a placeholder of the path names a secret: a credential in the path must be flagged "
            "with `credential_in_url`, an identifier declared `secret = false`",
        )
    if len(set(placeholders)) < len(placeholders) or not path_fields <= required:
        raise _fail(where, "each placeholder of the path is a required identifier, named once")
    if "{" in _PLACEHOLDER.sub("", path) or "}" in _PLACEHOLDER.sub("", path):
        raise _fail(where, "`check.path` holds a malformed placeholder")
    headers = raw.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str)
        and _HEADER_NAME.fullmatch(k)
        and k.lower() != "authorization"
        and isinstance(v, str)
        for k, v in headers.items()
    ):
        raise _fail(where, "`check.headers` must map header names (not Authorization) to strings")
    body = raw.get("body")
    if body is not None and (method != "POST" or not isinstance(body, str)):
        raise _fail(where, "`check.body` is a string, for POST checks only")
    docs = _str(raw, "docs", where)
    if urlsplit(docs).scheme != "https":
        raise _fail(where, "`check.docs` must be an https URL")
    return Check(
        method=method,
        path=path,
        auth=auth,
        headers=dict(headers),
        docs=docs,
        accept_json=_parse_condition(raw.get("accept_json"), where),
        body=body,
        content_type=_str(raw, "content_type", where, required=False) or "application/json",
        read_only=read_only,
        credential_in_url=in_url,
        path_fields=path_fields,
    )


def _parse_shape(raw: Any, where: str, identifiers: frozenset[str]) -> Shape:
    if not isinstance(raw, dict) or raw.get("key_type") not in KEY_TYPES:
        raise _fail(where, f"`key_type` must be one of {', '.join(KEY_TYPES)}")
    _only(raw, {"key_type", "required", "optional", "check"}, where)
    key_type = raw["key_type"]
    required = _key_names(raw, "required", where)
    if not required:
        raise _fail(where, "`required` must name at least one keyName")
    if "optional" in raw:
        optional = _key_names(raw, "optional", where)
    else:
        optional = OAUTH_OPTIONAL - required if key_type == OAUTH else frozenset()
    # The keyType shown for a stored set follows from its keyNames: a shape's
    # declared keyType must be the one its sets get.
    if key_type == OAUTH and not OAUTH_MARKERS & required:
        raise _fail(where, f"an oauth shape requires {OAUTH_MARKERS_TEXT}")
    if key_type == API_KEY and OAUTH_MARKERS & (required | optional):
        raise _fail(where, f"an api_key shape may not name {OAUTH_MARKERS_TEXT}")
    check = None
    if "check" in raw:
        check = _parse_check(raw["check"], where, required, required | optional, identifiers)
    return Shape(key_type, required, optional, check)


def _fixed_https(url: Any) -> bool:
    parts = urlsplit(url) if isinstance(url, str) else None
    return bool(
        parts
        and parts.scheme == "https"
        and parts.hostname
        and not parts.query
        and not parts.fragment
        and not parts.username
        and "{" not in url
    )


def _parse_oauth(raw: Any, where: str) -> OAuth:
    where = f"{where} oauth"
    if not isinstance(raw, dict):
        raise _fail(where, "must be a table")
    _only(raw, OAUTH_KEYS, where)
    for key in ("authorize_url", "token_url", "refresh_url"):
        if (key != "refresh_url" or key in raw) and not _fixed_https(raw.get(key)):
            raise _fail(where, f"`{key}` must be a fixed https URL without query or user info")
    if urlsplit(_str(raw, "docs", where)).scheme != "https":
        raise _fail(where, "`docs` must be an https URL")
    scopes = raw.get("scopes")
    if not isinstance(scopes, list) or not all(
        isinstance(scope, str) and scope and not any(c.isspace() for c in scope) for scope in scopes
    ):
        raise _fail(where, "`scopes` must be a list of scopes (no spaces)")
    separator = raw.get("scope_separator", " ")
    if separator not in (" ", ","):
        raise _fail(where, "`scope_separator` must be a space or a comma")
    for key in ("pkce", "rotates_refresh_tokens"):
        if not isinstance(raw.get(key), bool):
            raise _fail(where, f"`{key}` must be true or false")
    if raw.get("client_auth") not in CLIENT_AUTH_METHODS:
        raise _fail(where, f"`client_auth` must be one of {', '.join(CLIENT_AUTH_METHODS)}")
    params = raw.get("authorize_params", {})
    reserved = {"client_id", "redirect_uri", "state", "scope", "response_type"}
    if not isinstance(params, dict) or not all(
        isinstance(k, str)
        and isinstance(v, str)
        and k not in reserved
        and not k.startswith("code_")
        for k, v in params.items()
    ):
        raise _fail(where, "`authorize_params` must map other parameters than the flow's own")
    return OAuth(
        authorize_url=raw["authorize_url"],
        token_url=raw["token_url"],
        scopes=tuple(scopes),
        scope_separator=separator,
        pkce=raw["pkce"],
        client_auth=raw["client_auth"],
        rotates_refresh_tokens=raw["rotates_refresh_tokens"],
        authorize_params=dict(params),
        docs=raw["docs"],
        refresh_url=raw.get("refresh_url", ""),
    )


def _parse_api_host_pattern(pattern: Any, where: str) -> str:
    """A DNS name of two labels or more, with at most a leading `*.`: a wildcard stands for
    labels under a domain, never under a bare top-level domain (`*.com`)."""
    domain = pattern.removeprefix("*.") if isinstance(pattern, str) else None
    if domain is None or not _DOMAIN.fullmatch(domain):
        raise _fail(where, "`api_host_patterns` holds DNS names, each with at most a leading `*.`")
    return pattern


def _parse_api_host(
    raw: Mapping[str, Any], where: str, shapes: tuple[Shape, ...]
) -> ApiHost | None:
    """The connection's own API host: `api_host_field` (the keyName of the set, as the token
    answer names it) and `api_host_patterns`, given together."""
    if "api_host_field" not in raw and "api_host_patterns" not in raw:
        return None
    field = raw.get("api_host_field")
    if not isinstance(field, str) or not KEY_NAME_PATTERN.fullmatch(field):
        raise _fail(where, "`api_host_field` must be a keyName")
    if field in OAUTH_MARKERS or field in OAUTH_OPTIONAL:
        raise _fail(where, "`api_host_field` may not be one of the OAuth fields")
    patterns = raw.get("api_host_patterns")
    if not isinstance(patterns, list) or not patterns:
        raise _fail(where, "`api_host_field` needs `api_host_patterns`, a list of host patterns")
    if not any(field in shape.known for shape in shapes):
        raise _fail(where, f"`api_host_field` {field!r} is a keyName no shape names")
    return ApiHost(field, tuple(_parse_api_host_pattern(p, where) for p in patterns))


def _parse_fields(raw: Mapping[str, Any], where: str) -> frozenset[str]:
    """The identifiers of `[providers.fields]`: a table of keyNames, each `{ secret = false }`
    (an identifier) or `{ secret = true }` (a secret, the default)."""
    fields = raw.get("fields", {})
    if not isinstance(fields, dict):
        raise _fail(where, "`fields` must be a table of keyNames")
    identifiers = set()
    for name, declared in fields.items():
        if not KEY_NAME_PATTERN.fullmatch(name):
            raise _fail(where, f"`fields` holds {name!r}, which is not a keyName")
        if not isinstance(declared, dict):
            raise _fail(where, f"`fields.{name}` must be a table: {{ secret = false }}")
        _only(declared, FIELD_KEYS, f"{where} fields.{name}")
        secret = declared.get("secret")
        if not isinstance(secret, bool):
            raise _fail(where, f"`fields.{name}.secret` must be true or false")
        if not secret:
            if name in ALWAYS_SECRET:
                raise _fail(where, f"`fields.{name}` is a secret by its nature")
            identifiers.add(name)
    return frozenset(identifiers)


def _parse_bases(raw: Mapping[str, Any], where: str) -> dict[str, str]:
    """`[providers.bases]`: each name (not `host`, which names the host pattern's form) to a
    fixed https URL."""
    bases = raw.get("bases", {})
    if not isinstance(bases, dict) or ("bases" in raw and not bases):
        raise _fail(where, "`bases` must be a table of at least one name to a base URL")
    for name, url in bases.items():
        if not BASE_NAME_PATTERN.fullmatch(name) or name == HOST_BASE:
            raise _fail(where, f"a name of `bases` has {BASE_NAME_RULE}, and is not `host`")
        if not _fixed_https(url):
            raise _fail(where, f"`bases.{name}` must be a fixed https URL without query")
    return dict(bases)


def _parse_provider(raw: Any, position: int, *, operator: bool = False) -> Provider:
    where = f"providers[{position}]"
    if not isinstance(raw, dict):
        raise _fail(where, "must be a table")
    provider_id = _str(raw, "id", where)
    if not SERVICE_PATTERN.fullmatch(provider_id):
        raise _fail(where, "`id` must be a normalized service identifier")
    where = f"provider {provider_id!r}"
    _only(raw, PROVIDER_KEYS, where)
    name = _str(raw, "name", where)
    category = raw.get("category")
    if category not in CATEGORIES:
        raise _fail(where, f"`category` must be one of {', '.join(CATEGORIES)}")
    host = raw.get("host", "fixed")
    base_url: str | None
    if host == PER_CUSTOMER:
        if "base_url" in raw:
            raise _fail(where, "a per-customer host has no fixed `base_url`")
        base_url = None
    elif host == "fixed":
        base_url = _str(raw, "base_url", where)
        if not _fixed_https(base_url):
            raise _fail(where, "`base_url` must be a fixed https URL without query or user info")
    else:
        raise _fail(where, f"`host` must be fixed or {PER_CUSTOMER}")
    raw_shapes = raw.get("shapes")
    if not isinstance(raw_shapes, list) or not raw_shapes:
        raise _fail(where, "`shapes` must list at least one credential shape")
    identifiers = _parse_fields(raw, where)
    shapes = tuple(
        _parse_shape(raw_shape, f"{where} shapes[{index}]", identifiers)
        for index, raw_shape in enumerate(raw_shapes)
    )
    unnamed = set(raw.get("fields", {})) - {name for shape in shapes for name in shape.known}
    if unnamed:
        raise _fail(where, f"`fields` declares {min(unnamed)!r}, a keyName no shape names")
    oauth = _parse_oauth(raw["oauth"], where) if "oauth" in raw else None
    if oauth is not None and not any(shape.key_type == OAUTH for shape in shapes):
        raise _fail(where, "an `oauth` block needs an oauth shape to store its sets")
    api_host = _parse_api_host(raw, where, shapes)
    bases = _parse_bases(raw, where)
    host_pattern = None
    if "host_pattern" in raw:
        try:
            host_pattern = parse_host_pattern(raw["host_pattern"])
        except ValueError as exc:
            raise _fail(where, f"`host_pattern`: {exc}") from None
    answer_urls = raw.get("answer_urls", "")
    if answer_urls != "" and answer_urls not in ANSWER_URLS:
        raise _fail(where, f"`answer_urls` must be one of {', '.join(ANSWER_URLS)}")
    try:
        sensitive, sensitive_none = parse_sensitive(raw, where, operator=operator)
    except SensitiveError as exc:
        raise _fail(where, str(exc)) from None
    try:
        graphql = parse_graphql(raw)
    except GraphQLEntryError as exc:
        raise _fail(where, str(exc)) from None
    return Provider(
        id=provider_id,
        name=name,
        category=category,
        base_url=base_url,
        shapes=shapes,
        base_url_example=_str(raw, "base_url_example", where, required=False),
        note=_str(raw, "note", where, required=False),
        oauth=oauth,
        api_host=api_host,
        sensitive=sensitive,
        sensitive_none=sensitive_none,
        identifiers=identifiers,
        bases=bases,
        host_pattern=host_pattern,
        answer_urls=answer_urls,
        graphql=graphql,
    )


def parse_catalog(
    text: str, *, source: str = CATALOG_PATH.name, operator: bool = False
) -> dict[str, Provider]:
    """The providers of one catalog file's text; `source` names it in errors. `operator` marks
    the operator's own entries (CREDVAULT_EXTRA_CATALOG), which may leave out `sensitive` and
    `sensitive_none` (providers/sensitive.py)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{source}: not valid TOML: {exc}") from None
    entries = data.get("providers")
    if not isinstance(entries, list):
        raise CatalogError(f"{source}: no [[providers]] entries")
    providers: dict[str, Provider] = {}
    for position, raw in enumerate(entries):
        try:
            provider = _parse_provider(raw, position, operator=operator)
        except CatalogError as exc:
            raise CatalogError(f"{source}: {exc}") from None
        if provider.id in providers:
            raise CatalogError(f"{source}: provider {provider.id!r}: `id` appears twice")
        providers[provider.id] = replace(provider, operator=operator) if operator else provider
    return providers


def extra_catalog(path: str) -> dict[str, Provider]:
    """The operator's own entries (CREDVAULT_EXTRA_CATALOG: a file in the catalog's format)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(
            f"CREDVAULT_EXTRA_CATALOG: cannot read {path}: {type(exc).__name__}"
        ) from None
    return parse_catalog(text, source=f"CREDVAULT_EXTRA_CATALOG ({path})", operator=True)


@lru_cache(maxsize=1)
def catalog() -> dict[str, Provider]:
    """Every provider of the catalog, by id (read once): credvault's file, then the operator's
    entries, which may not reuse an id of credvault's."""
    from django.conf import settings

    providers = parse_catalog(CATALOG_PATH.read_text(encoding="utf-8"))
    extra_path = settings.CREDVAULT_EXTRA_CATALOG
    if extra_path:
        for provider_id, provider in extra_catalog(extra_path).items():
            if provider_id in providers:
                raise CatalogError(
                    f"CREDVAULT_EXTRA_CATALOG ({extra_path}): provider {provider_id!r}: `id` "
                    "is already in credvault's catalog"
                )
            providers[provider_id] = provider
    return providers


def get(provider_id: str) -> Provider | None:
    return catalog().get(provider_id)
