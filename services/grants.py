"""A grant: which service an agent may use, and how (`access`, `methods`, `paths`, `graphql`,
`base`), until when (`expires_at`), and which calls need a person's approval (`approve`).

The one owner of the grant rules: the access is `proxy` (the default) or `read`; the methods
are some of PROXY_METHODS; each path prefix starts with `/`, holds no empty, `.` or `..`
segment, control character, `?`, `#`, backslash or `@`, at most MAX_GRANT_PATH_CHARS long and
MAX_GRANT_PATHS of them; `graphql` names at most MAX_GRANT_MUTATIONS of the sensitive GraphQL
mutations the service's catalog entry lists; `base`, where set, is one the catalog gives the
service; `expires_at`, where set, is in the future when given; `approve` holds at most
MAX_APPROVE_RULES rules (`approve_errors`). An agent holds at most MAX_GRANTS grants, one per
service. `checked_grants` enforces every rule, and `services.agents.put_agent` calls it: the
API's serializers (which state the same limits in the OpenAPI document, from these constants)
and `create_agent` only translate their input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.utils import timezone

from providers import catalog
from providers.graphql_operations import is_name
from providers.identifiers import SERVICE_RULE
from services.exceptions import FieldErrorCode, InvalidIdentifier, InvalidRequest, field_error
from services.identifiers import service_identifier
from services.models import PROXY_METHODS, WHOLE_API, Grant, GrantAccess

MAX_GRANTS = 100
MAX_GRANT_PATHS = 20
MAX_GRANT_PATH_CHARS = 256
MAX_GRANT_MUTATIONS = 50
MAX_APPROVE_RULES = 10
GRAPHQL_NAME_RULE = "A GraphQL mutation's name, as the provider's schema spells it."
# A grant's path prefix: `/`, then segments that are neither empty, `.` nor `..`, holding no
# control character, `?`, `#`, backslash or `@` (a proxied path never holds one); one trailing
# slash allowed.
GRANT_PATH_PATTERN = r"^(?!.*//)/(?!(?:.*/)?\.\.?(?:/|$))[^\u0000-\u001f\u007f-\u009f?#\\@]*$"
GRANT_PATH_RULE = (
    "A path prefix starts with '/' and holds no empty, '.' or '..' segment, control character, "
    "'?', '#', backslash or '@'."
)
_GRANT_PATH = re.compile(GRANT_PATH_PATTERN)


@dataclass(frozen=True)
class ApproveRule:
    """A rule of the calls of a grant that need a person's approval: None covers every method
    (`methods`) or every path (`paths`)."""

    methods: tuple[str, ...] | None = None
    paths: tuple[str, ...] | None = None

    @classmethod
    def given(
        cls, *, methods: Iterable[str] | None = None, paths: Iterable[str] | None = None
    ) -> ApproveRule:
        """A rule in its one form: its methods in PROXY_METHODS' order (others kept, so that
        `checked_grants` refuses them), its paths sorted, each once."""
        if methods is not None:
            chosen = list(dict.fromkeys(methods))
            known = [method for method in PROXY_METHODS if method in chosen]
            methods = known + [method for method in chosen if method not in PROXY_METHODS]
        return cls(
            methods=None if methods is None else tuple(methods),
            paths=None if paths is None else tuple(sorted(set(paths))),
        )

    @classmethod
    def stored(cls, rule: dict[str, Any]) -> ApproveRule:
        return cls.given(methods=rule.get("methods"), paths=rule.get("paths"))

    def as_json(self) -> dict[str, list[str]]:
        """The rule as stored and shown: only the members it sets."""
        rule = {}
        if self.methods is not None:
            rule["methods"] = list(self.methods)
        if self.paths is not None:
            rule["paths"] = list(self.paths)
        return rule


@dataclass(frozen=True)
class GrantSpec:
    """One grant as given and as shown: a service and what the agent may do with it."""

    service: str
    access: str = GrantAccess.PROXY
    methods: tuple[str, ...] = PROXY_METHODS
    paths: tuple[str, ...] = (WHOLE_API,)
    base: str = ""  # the one base covered; "" for every base
    graphql: tuple[str, ...] = ()
    expires_at: datetime | None = None
    approve: tuple[ApproveRule, ...] = ()

    @classmethod
    def of(cls, grant: Grant) -> GrantSpec:
        return cls(
            grant.service,
            grant.access,
            tuple(grant.methods),
            tuple(grant.paths),
            grant.base,
            graphql=tuple(grant.graphql),
            expires_at=grant.expires_at,
            approve=tuple(map(ApproveRule.stored, grant.approve)),
        )

    def expired(self, now: datetime | None = None) -> bool:
        """Whether the grant has expired: it then refuses as if it were absent."""
        return grant_expired(self.expires_at, now)

    @classmethod
    def given(
        cls,
        service: str,
        *,
        access: str = GrantAccess.PROXY,
        methods: Iterable[str] = PROXY_METHODS,
        paths: Iterable[str] = (WHOLE_API,),
        base: str = "",
        graphql: Iterable[str] = (),
        expires_at: datetime | None = None,
        approve: Iterable[ApproveRule] = (),
    ) -> GrantSpec:
        """A grant as a client or an operator gave it, in its one form: each method once, in
        PROXY_METHODS' order, and the paths sorted, whatever order they came in. Methods
        outside PROXY_METHODS are kept, so that `checked_grants` refuses them. The GraphQL
        mutations keep the order they came in, so that an error names the one the client
        sent at that index; `checked_grants` sorts them. The `approve` rules keep their order
        too (a call goes under the first rule it matches)."""
        chosen = list(dict.fromkeys(methods))
        known = [method for method in PROXY_METHODS if method in chosen]
        return cls(
            service=service,
            access=access,
            methods=tuple(known + [method for method in chosen if method not in PROXY_METHODS]),
            paths=tuple(sorted(set(paths))),
            base=base,
            graphql=tuple(graphql),
            expires_at=expires_at,
            approve=tuple(approve),
        )

    def normalized(self) -> GrantSpec:
        """The grant in its stored form: its GraphQL mutations sorted, each once; its `approve`
        rules each once, in the order given."""
        return replace(
            self,
            graphql=tuple(sorted(set(self.graphql))),
            approve=tuple(dict.fromkeys(self.approve)),
        )


def grant_expired(expires_at: datetime | None, now: datetime | None = None) -> bool:
    """Whether a grant that expires at `expires_at` (None: never) has expired by `now`."""
    return expires_at is not None and expires_at <= (now or timezone.now())


def grant_errors(grant: GrantSpec, where: str = "") -> list[dict[str, str]]:
    """What breaks the grant rules in one grant, each naming its field under `where`."""
    return (
        option_errors(access=grant.access, methods=grant.methods, paths=grant.paths, where=where)
        + base_errors(service=grant.service, base=grant.base, where=where)
        + graphql_errors(service=grant.service, graphql=grant.graphql, where=where)
        + expiry_errors(expires_at=grant.expires_at, where=where)
        + approve_errors(approve=grant.approve, granted=grant.methods, where=where)
    )


def expiry_errors(*, expires_at: datetime | None, where: str = "") -> list[dict[str, str]]:
    """What breaks the rule of a grant's `expiresAt` as given: a moment in the future."""
    if expires_at is None or expires_at > timezone.now():
        return []
    return [
        field_error(
            f"{where}expiresAt",
            FieldErrorCode.INVALID,
            "Must be in the future: a grant given already expired would refuse every call.",
        )
    ]


def approve_errors(
    *, approve: Sequence[ApproveRule], granted: Sequence[str], where: str = ""
) -> list[dict[str, str]]:
    """What breaks the rules of a grant's `approve`: at most MAX_APPROVE_RULES rules; a rule's
    `methods`, when it has them, one or more of the grant's own `granted` methods; its `paths`,
    when it has them, 1 to MAX_GRANT_PATHS path prefixes under the grant paths' rule."""
    if len(approve) > MAX_APPROVE_RULES:
        return [
            field_error(
                f"{where}approve", FieldErrorCode.TOO_LONG, f"At most {MAX_APPROVE_RULES} rules."
            )
        ]
    errors = []
    for index, rule in enumerate(approve):
        named = f"{where}approve[{index}]."
        if rule.methods is not None:
            if not rule.methods:
                errors.append(
                    field_error(
                        f"{named}methods",
                        FieldErrorCode.INVALID_LENGTH,
                        "One or more methods; leave `methods` out to cover every method.",
                    )
                )
            for place, method in enumerate(rule.methods):
                if method not in PROXY_METHODS or method not in granted:
                    errors.append(
                        field_error(
                            f"{named}methods[{place}]",
                            FieldErrorCode.INVALID,
                            "One of the grant's own methods "
                            f"({', '.join(granted)}): the grant refuses any other.",
                        )
                    )
        if rule.paths is not None:
            errors += _path_errors(rule.paths, f"{named}paths")
    return errors


def base_errors(*, service: str, base: str, where: str = "") -> list[dict[str, str]]:
    """What breaks the rule of a grant's `base`: empty (every base), or a name after `~` in
    the service's proxy path, which the catalog gives the service (`router`, `host`)."""
    provider = catalog.get(service)
    names = provider.base_names if provider is not None else ()
    if not base or base in names:
        return []
    known = f"one of {', '.join(names)}" if names else "none: the service has one base"
    return [
        field_error(
            f"{where}base",
            FieldErrorCode.INVALID,
            f"The base named is not one of the service's; its other bases are {known}.",
        )
    ]


def graphql_errors(
    *, service: str, graphql: Sequence[str], where: str = ""
) -> list[dict[str, str]]:
    """What breaks the rules of a grant's `graphql`: at most MAX_GRANT_MUTATIONS names, each a
    sensitive mutation that the service's catalog entry lists (a name it does not list would
    allow nothing, so it is a mistake worth saying)."""
    if len(graphql) > MAX_GRANT_MUTATIONS:
        return [
            field_error(
                f"{where}graphql",
                FieldErrorCode.TOO_LONG,
                f"At most {MAX_GRANT_MUTATIONS} GraphQL mutations.",
            )
        ]
    provider = catalog.get(service)
    listed = provider.graphql.mutations if provider and provider.graphql else frozenset()
    errors = []
    for index, name in enumerate(graphql):
        if not is_name(name):
            errors.append(
                field_error(f"{where}graphql[{index}]", FieldErrorCode.INVALID, GRAPHQL_NAME_RULE)
            )
        elif name not in listed:
            errors.append(
                field_error(
                    f"{where}graphql[{index}]",
                    FieldErrorCode.INVALID,
                    "Not a sensitive GraphQL mutation of this service: a grant names only the "
                    "mutations the provider's catalog entry lists.",
                )
            )
    return errors


def option_errors(
    *, access: str, methods: Sequence[str], paths: Sequence[str], where: str = ""
) -> list[dict[str, str]]:
    """What breaks the grant rules in a grant's options, whatever its service, each naming its
    field under `where`."""
    errors = []
    if access not in GrantAccess.values:
        errors.append(
            field_error(f"{where}access", FieldErrorCode.INVALID, "Either proxy or read.")
        )
    if not methods or any(method not in PROXY_METHODS for method in methods):
        errors.append(
            field_error(
                f"{where}methods",
                FieldErrorCode.INVALID,
                f"One or more of {', '.join(PROXY_METHODS)}.",
            )
        )
    return errors + _path_errors(paths, f"{where}paths")


def _path_errors(paths: Sequence[str], field: str) -> list[dict[str, str]]:
    """What breaks the rule of path prefixes (a grant's, an `approve` rule's) in `field`."""
    errors = []
    if not 1 <= len(paths) <= MAX_GRANT_PATHS:
        errors.append(
            field_error(
                field, FieldErrorCode.INVALID_LENGTH, f"From 1 to {MAX_GRANT_PATHS} path prefixes."
            )
        )
    for index, path in enumerate(paths):
        if len(path) > MAX_GRANT_PATH_CHARS or not _GRANT_PATH.fullmatch(path):
            errors.append(field_error(f"{field}[{index}]", FieldErrorCode.INVALID, GRANT_PATH_RULE))
    return errors


class Given(NamedTuple):
    """A grant as a client sent it: the grant, the field that holds the whole entry
    (`services[0]`) and the field that names its service (`services[0].service`, or the entry
    itself when it is a bare service identifier)."""

    grant: GrantSpec
    entry: str = ""
    service_field: str = ""


def given_in_list(grants: Iterable[GrantSpec]) -> list[Given]:
    """Grants given as a list (by a command, a script): each named by its place, `services[0]`."""
    return [Given(grant, f"services[{index}]") for index, grant in enumerate(grants)]


def checked_grants(grants: Sequence[Given]) -> list[GrantSpec]:
    """An agent's whole set of grants, each service normalized: every rule checked, or
    InvalidRequest naming each broken one by the field it came from. Grants that name one
    service count once when they grant the same; with different options they are refused.
    Sorted by service."""
    errors = []
    if len(grants) > MAX_GRANTS:
        errors.append(
            field_error("services", FieldErrorCode.TOO_LONG, f"At most {MAX_GRANTS} grants.")
        )
    unique: dict[str, GrantSpec] = {}
    for sent, entry, service_field in grants:
        try:
            given = replace(sent, service=service_identifier(sent.service))
        except InvalidIdentifier:
            named = service_field or entry or "services"
            errors.append(field_error(named, FieldErrorCode.INVALID_SERVICE, SERVICE_RULE))
            continue
        errors += grant_errors(given, f"{entry}." if entry else "")
        grant = given.normalized()
        if unique.setdefault(grant.service, grant) != grant:
            errors.append(
                field_error(
                    service_field or entry or "services",
                    FieldErrorCode.DUPLICATE,
                    "Two different grants of one service.",
                )
            )
    if errors:
        raise InvalidRequest(errors=errors)
    return sorted(unique.values(), key=lambda grant: grant.service)
