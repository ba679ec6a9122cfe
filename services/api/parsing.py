"""The strict reader of request bodies: the credential input of test and store,
an agent's grants, an agent-token request.

Order of refusals: 413 by the declared length (before anything is read), 415 by the media type,
400 `malformed_json` for anything that is not strict JSON (invalid UTF-8, syntax, duplicate
member names, NaN or Infinity, lone surrogates, nesting too deep to parse), then 400
`invalid_request` with field errors for a document of the wrong shape. The shapes and their
limits are the serializers of `serializers.py` (which the OpenAPI document states), checked
here strictly by `shape_errors`. No message holds a value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.core.validators import RegexValidator
from django.http import HttpRequest
from rest_framework import serializers
from rest_framework.request import Request

from services.api.serializers import (
    AgentInputSerializer,
    AgentTokenInputSerializer,
    ConnectInputSerializer,
    CredentialInputSerializer,
    GrantEntryField,
    OAuthClientInputSerializer,
    ServiceIdentifierField,
)
from services.api.wsgi import MAX_BODY_BYTES
from services.exceptions import (
    FieldErrorCode,
    InvalidRequest,
    MalformedJSON,
    PayloadTooLarge,
    UnsupportedMediaType,
    field_error,
)
from services.grants import Given, GrantSpec
from services.masking import Secret
from services.models import PROXY_METHODS, WHOLE_API, GrantAccess

_MEMBER_NAME_SHOWN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class CredentialInput:
    """The body as read: the service as sent and the fields with masked values."""

    service: str
    fields: list[tuple[str, Secret]]


class _NotStrict(Exception):
    pass


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _NotStrict("duplicate member name")
        for text in (key, value):
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise _NotStrict("lone surrogate") from None
        obj[key] = value
    return obj


def _reject_constant(name: str) -> None:
    raise _NotStrict("NaN and Infinity are not JSON")


# One decoder for every body: `json.loads` with these options builds a new one per call.
_STRICT = json.JSONDecoder(object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)


def loads_strict(raw: bytes) -> Any:
    """Parse strict JSON from UTF-8 bytes, or raise MalformedJSON (never RecursionError).
    A byte order mark is not JSON (RFC 8259): the decoder refuses it as any other text."""
    try:
        text = raw.decode("utf-8")
        return _STRICT.decode(text)
    except UnicodeDecodeError:
        raise MalformedJSON("The body is not valid UTF-8.") from None
    except _NotStrict as exc:
        raise MalformedJSON(f"The body is not strict JSON: {exc}.") from None
    except RecursionError:
        raise MalformedJSON("The body is nested deeper than the input shape allows.") from None
    except ValueError:
        raise MalformedJSON("The body is not valid JSON.") from None


def _check_media_type(content_type: str) -> None:
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "application/json":
        raise UnsupportedMediaType()
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
            raise UnsupportedMediaType("Only the UTF-8 charset is accepted.")


def body_at_most(request: HttpRequest, most: int) -> bytes:
    """The request's body, or 413 when its declared length (checked before anything is read)
    or the body itself is over `most` bytes."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (declared.isdigit() and int(declared) > most) or len(request.body) > most:
        raise PayloadTooLarge.over(most)
    return request.body


def read_json_body(request: Request) -> Any:
    """Size, media type and strict parsing of a JSON request body."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except ValueError:
        raise InvalidRequest("Content-Length is not a number.") from None
    if length > MAX_BODY_BYTES:
        raise PayloadTooLarge()
    _check_media_type(request.META.get("CONTENT_TYPE", ""))
    return loads_strict(request.body)


def _member_label(name: str) -> str:
    return name if _MEMBER_NAME_SHOWN.fullmatch(name) else "(unnamed member)"


# A shape, compiled once from its serializer (`compile_shape`): plain nodes, each checking one
# value and naming every error by the field's path. The serializers stay the one definition
# of shapes and limits; walking DRF's field objects on every request cost a store or a test
# 40 µs (docs/performance.md).


@dataclass(frozen=True, slots=True)
class _Text:
    min_length: int | None
    max_length: int | None
    patterns: tuple[tuple[re.Pattern, str], ...]  # (pattern, its message)
    normalized: bool  # a service identifier: normalized by the business rules, which name errors

    def errors(self, text: Any, where: str) -> list[dict[str, str]]:
        if not isinstance(text, str):
            return [field_error(where, FieldErrorCode.INVALID_TYPE, "Must be a string.")]
        if self.normalized:
            return []
        if self.min_length and len(text) < self.min_length:
            return [field_error(where, FieldErrorCode.TOO_SHORT, "Must not be empty.")]
        if self.max_length is not None and len(text) > self.max_length:
            return [
                field_error(
                    where, FieldErrorCode.TOO_LONG, f"At most {self.max_length} characters."
                )
            ]
        for pattern, message in self.patterns:
            # The whole text, as JSON Schema reads the anchors: `$` of Python's `search` would
            # also match before a final newline.
            if not pattern.fullmatch(text):
                return [field_error(where, FieldErrorCode.INVALID, message)]
        return []


@dataclass(frozen=True, slots=True)
class _Whole:
    low: int
    high: int

    def errors(self, value: Any, where: str) -> list[dict[str, str]]:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not self.low <= value <= self.high
        ):
            return [
                field_error(
                    where, FieldErrorCode.INVALID, f"A whole number from {self.low} to {self.high}."
                )
            ]
        return []


@dataclass(frozen=True, slots=True)
class _Array:
    child: Any
    low: int | None
    high: int | None

    def errors(self, items: Any, where: str) -> list[dict[str, str]]:
        if not isinstance(items, list):
            return [field_error(where, FieldErrorCode.INVALID_TYPE, "Must be an array.")]
        low, high = self.low, self.high
        if (low is not None and len(items) < low) or (high is not None and len(items) > high):
            bounds = f"{low or 0} to {high}" if high is not None else f"at least {low}"
            return [
                field_error(where, FieldErrorCode.INVALID_LENGTH, f"Must hold {bounds} entries.")
            ]
        errors = []
        for index, item in enumerate(items):
            errors += self.child.errors(item, f"{where}[{index}]")
        return errors


@dataclass(frozen=True, slots=True)
class Shape:
    """An object with exactly its members: none unknown, every required one present, each
    member's value checked, and `unique_items` (array member to the member of its entries
    that must differ between them)."""

    members: dict[str, Any]
    required: tuple[str, ...]
    unique_items: dict[str, str]

    def errors(self, obj: Any, where: str) -> list[dict[str, str]]:
        if not isinstance(obj, dict):
            return [field_error(where, FieldErrorCode.INVALID_TYPE, "Must be an object.")]
        prefix = f"{where}." if where else ""
        members = self.members
        errors = [
            field_error(
                f"{prefix}{_member_label(name)}",
                FieldErrorCode.UNKNOWN_MEMBER,
                "Member not allowed.",
            )
            for name in obj
            if name not in members
        ]
        errors += [
            field_error(f"{prefix}{name}", FieldErrorCode.REQUIRED, "Member is required.")
            for name in self.required
            if name not in obj
        ]
        for name, node in members.items():
            if name in obj:
                errors += node.errors(obj[name], f"{prefix}{name}")
        for name, member in self.unique_items.items():
            if isinstance(obj.get(name), list):
                errors += _duplicates(obj[name], member, f"{prefix}{name}")
        return errors


def _duplicates(items: list, member: str, where: str) -> list[dict[str, str]]:
    seen: set[str] = set()
    errors = []
    for index, item in enumerate(items):
        value = item.get(member) if isinstance(item, dict) else None
        if not isinstance(value, str):
            continue
        if value in seen:
            errors.append(
                field_error(
                    f"{where}[{index}].{member}",
                    FieldErrorCode.DUPLICATE,
                    f"{member}s must be unique.",
                )
            )
        seen.add(value)
    return errors


def _eager(regex: re.Pattern) -> re.Pattern:
    """A validator's pattern itself: Django keeps it behind a lazy object, which costs a proxy
    call on every match."""
    return re.compile(regex.pattern, regex.flags)


@dataclass(frozen=True, slots=True)
class _Choice:
    values: tuple[str, ...]

    def errors(self, value: Any, where: str) -> list[dict[str, str]]:
        if value in self.values and isinstance(value, str):
            return []
        return [field_error(where, FieldErrorCode.INVALID, f"One of {', '.join(self.values)}.")]


@dataclass(frozen=True, slots=True)
class _TextOrObject:
    """A string checked by `text`, or an object checked by `shape`."""

    text: Any
    shape: Any

    def errors(self, value: Any, where: str) -> list[dict[str, str]]:
        if isinstance(value, str):
            return self.text.errors(value, where)
        if isinstance(value, dict):
            return self.shape.errors(value, where)
        return [
            field_error(
                where, FieldErrorCode.INVALID_TYPE, "Must be a service identifier or an object."
            )
        ]


def compile_shape(field: serializers.Field) -> Any:
    """The node that checks what `field` (a serializer or one of its fields) describes."""
    if isinstance(field, GrantEntryField):
        return _TextOrObject(compile_shape(field.text), compile_shape(field.grant))
    if isinstance(field, serializers.ChoiceField):
        return _Choice(tuple(str(choice) for choice in field.choices))
    if isinstance(field, serializers.ListSerializer | serializers.ListField):
        return _Array(compile_shape(field.child), field.min_length, field.max_length)
    if isinstance(field, serializers.Serializer):
        fields = field.fields
        return Shape(
            members={name: compile_shape(member) for name, member in fields.items()},
            required=tuple(name for name, member in fields.items() if member.required),
            unique_items=dict(getattr(field, "unique_items", {})),
        )
    if isinstance(field, serializers.IntegerField):
        return _Whole(field.min_value, field.max_value)
    if isinstance(field, serializers.CharField):
        return _Text(
            min_length=field.min_length,
            max_length=field.max_length,
            patterns=tuple(
                (_eager(validator.regex), str(field.error_messages["invalid"]))
                for validator in field.validators
                if isinstance(validator, RegexValidator)
            ),
            normalized=isinstance(field, ServiceIdentifierField),
        )
    raise TypeError(f"no strict check for {type(field).__name__}")


def shape_errors(shape: Shape, data: Any) -> list[dict[str, str]]:
    """Every way `data` differs from `shape`, each naming its field; [] when it fits."""
    if not isinstance(data, dict):
        return [
            field_error("(body)", FieldErrorCode.INVALID_TYPE, "The body must be a JSON object.")
        ]
    return shape.errors(data, "")


def _checked(shape: Shape, data: Any) -> dict[str, Any]:
    errors = shape_errors(shape, data)
    if errors:
        raise InvalidRequest(errors=errors)
    return data


# Each shape compiled once, from the serializer the OpenAPI document states.
CREDENTIAL_INPUT = compile_shape(CredentialInputSerializer())
AGENT_INPUT = compile_shape(AgentInputSerializer())
AGENT_TOKEN_REQUEST = compile_shape(AgentTokenInputSerializer())


def parse_credential_input(data: Any) -> CredentialInput:
    """Check the document's shape exactly; collect every error before refusing."""
    document = _checked(CREDENTIAL_INPUT, data)
    return CredentialInput(
        service=document["service"],
        fields=[(entry["keyName"], Secret(entry["value"])) for entry in document["credentials"]],
    )


def read_credential_input(request: Request) -> CredentialInput:
    return parse_credential_input(read_json_body(request))


def parse_grants(data: Any) -> list[Given]:
    """`{"services": [...]}` of a PUT of an agent: each entry, a service identifier (the
    default grant) or an object, as a grant with the fields it came from. The grant rules
    themselves (one grant per service among them) are `put_agent`'s."""
    errors = shape_errors(AGENT_INPUT, data)
    entries = data.get("services") if isinstance(data, dict) else None
    named: list[tuple[str, str, str, dict]] = []
    for index, raw in enumerate(entries if isinstance(entries, list) else []):
        entry = {"service": raw} if isinstance(raw, str) else raw
        if not isinstance(entry, dict) or not isinstance(entry.get("service"), str):
            continue  # named by shape_errors
        where = f"services[{index}]"
        service_field = where if isinstance(raw, str) else f"{where}.service"
        named.append((where, service_field, entry["service"], entry))
    if errors:
        raise InvalidRequest(errors=errors)
    return [
        Given(
            GrantSpec.given(
                service,
                access=entry.get("access", GrantAccess.PROXY),
                methods=entry.get("methods", PROXY_METHODS),
                paths=entry.get("paths", (WHOLE_API,)),
                base=entry.get("base", ""),
                graphql=entry.get("graphql", ()),
            ),
            where,
            service_field,
        )
        for where, service_field, service, entry in named
    ]


def parse_token_request(request: Request) -> int | None:
    """The optional `{"expiresInDays": N}` of an agent-token request: N, or None when the
    body is empty or names no expiry."""
    if request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        return None  # no body: no options, whatever the media type says
    document = _checked(AGENT_TOKEN_REQUEST, read_json_body(request))
    return document.get("expiresInDays")


OAUTH_CLIENT_INPUT = compile_shape(OAuthClientInputSerializer())
CONNECT_INPUT = compile_shape(ConnectInputSerializer())


def read_oauth_client(request: Request) -> tuple[str, Secret]:
    """`{clientId, clientSecret}`: the id, and the secret masked."""
    document = _checked(OAUTH_CLIENT_INPUT, read_json_body(request))
    return document["clientId"], Secret(document["clientSecret"])


def read_connect_options(request: Request) -> tuple[list[str] | None, str | None]:
    """The optional `{scopes, service}` of a connect (an absent body: the defaults)."""
    if request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        return None, None
    document = _checked(CONNECT_INPUT, read_json_body(request))
    return document.get("scopes"), document.get("service")
