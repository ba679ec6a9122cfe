"""The strict reader of request bodies: `read_shape` reads a body of the shape an input
serializer declares; the credential input and an agent's grants have readers of their own.

Order of refusals: 413 by the declared length (before anything is read), 415 by the media type,
400 `malformed_json` for anything that is not strict JSON (invalid UTF-8, syntax, duplicate
member names, NaN or Infinity, lone surrogates, nesting too deep to parse), then 400
`invalid_request` with field errors for a document of the wrong shape. The shapes and their
limits are the serializers of `serializers.py` (which the OpenAPI document states), each
compiled once into a strict check (`compile_shape`). No message holds a value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.core.validators import RegexValidator
from django.http import HttpRequest
from rest_framework import serializers
from rest_framework.request import Request

from services.api.serializers import (
    AgentInputSerializer,
    ConnectInputSerializer,
    CredentialInputSerializer,
    GrantEntryField,
    OAuthClientInputSerializer,
    ServiceIdentifierField,
)
from services.api.wsgi import body_limit
from services.exceptions import (
    FieldErrorCode,
    InvalidRequest,
    MalformedJSON,
    PayloadTooLarge,
    UnsupportedMediaType,
    field_error,
)
from services.grants import ApproveRule, Given, GrantSpec
from services.masking import Secret
from services.models import PROXY_METHODS, WHOLE_API, GrantAccess
from services.sealed import OpenedSet
from services.times import RFC3339_RULE, parse_rfc3339

_MEMBER_NAME_SHOWN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class CredentialInput:
    """The body as read: the service as sent and the fields with masked values."""

    service: str
    fields: OpenedSet


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


def body_at_most(request: HttpRequest) -> bytes:
    """The request's body, or 413 when its declared length (checked before anything is read)
    or the body itself is over the path's `body_limit`."""
    most = body_limit(request.META)
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (declared.isdigit() and int(declared) > most) or len(request.body) > most:
        raise PayloadTooLarge.over(most)
    return request.body


def read_json_body(request: Request) -> Any:
    """Size (by the declared length, before anything is read), media type and strict parsing
    of a JSON request body."""
    try:
        int(request.META.get("CONTENT_LENGTH") or "0")
    except ValueError:
        raise InvalidRequest("Content-Length is not a number.") from None
    body = body_at_most(request)
    _check_media_type(request.META.get("CONTENT_TYPE", ""))
    return loads_strict(body)


# A shape, compiled once from its serializer (`compile_shape`) into plain checks, each of one
# value, naming every error by the field's path. The serializers stay the one definition of
# shapes and limits; walking DRF's field objects on every request cost a store or a test
# 40 µs (docs/performance.md).
Errors = list[dict[str, str]]
Check = Callable[[Any, str], Errors]


def _error(where: str, code: FieldErrorCode, message: str) -> Errors:
    return [field_error(where, code, message)]


def _text(field: serializers.CharField) -> Check:
    low, high = field.min_length, field.max_length
    # Django keeps a validator's pattern behind a lazy object: a proxy call on every match.
    patterns = [
        # Django compiles a validator's regex when it is made; the stubs allow a str.
        (re.compile(v.regex.pattern, v.regex.flags), str(field.error_messages["invalid"]))  # type: ignore[union-attr]
        for v in field.validators
        if isinstance(v, RegexValidator)
    ]
    # A service identifier is normalized by the business rules, which name its errors.
    normalized = isinstance(field, ServiceIdentifierField)

    def check(text: Any, where: str) -> Errors:
        if not isinstance(text, str):
            return _error(where, FieldErrorCode.INVALID_TYPE, "Must be a string.")
        if normalized:
            return []
        if low and len(text) < low:
            return _error(where, FieldErrorCode.TOO_SHORT, "Must not be empty.")
        if high is not None and len(text) > high:
            return _error(where, FieldErrorCode.TOO_LONG, f"At most {high} characters.")
        for pattern, message in patterns:
            # The whole text, as JSON Schema reads the anchors (`$` of `search` would also
            # match before a final newline).
            if not pattern.fullmatch(text):
                return _error(where, FieldErrorCode.INVALID, message)
        return []

    return check


def _whole(low: int, high: int) -> Check:
    def check(value: Any, where: str) -> Errors:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            return _error(where, FieldErrorCode.INVALID, f"A whole number from {low} to {high}.")
        return []

    return check


def _moment(value: Any, where: str) -> Errors:
    if isinstance(value, str) and parse_rfc3339(value) is not None:
        return []
    return _error(where, FieldErrorCode.INVALID, RFC3339_RULE)


def _boolean(value: Any, where: str) -> Errors:
    if not isinstance(value, bool):
        return _error(where, FieldErrorCode.INVALID_TYPE, "Must be true or false.")
    return []


def _choice(values: tuple[str, ...]) -> Check:
    def check(value: Any, where: str) -> Errors:
        if value in values and isinstance(value, str):
            return []
        return _error(where, FieldErrorCode.INVALID, f"One of {', '.join(values)}.")

    return check


def _array(child: Check, low: int | None, high: int | None) -> Check:
    bounds = f"{low or 0} to {high}" if high is not None else f"at least {low}"

    def check(items: Any, where: str) -> Errors:
        if not isinstance(items, list):
            return _error(where, FieldErrorCode.INVALID_TYPE, "Must be an array.")
        if (low is not None and len(items) < low) or (high is not None and len(items) > high):
            return _error(where, FieldErrorCode.INVALID_LENGTH, f"Must hold {bounds} entries.")
        errors = []
        for index, item in enumerate(items):
            errors += child(item, f"{where}[{index}]")
        return errors

    return check


UNKNOWN = "Member not allowed."


def _member_label(name: str) -> str:
    return name if _MEMBER_NAME_SHOWN.fullmatch(name) else "(unnamed member)"


def _object(serializer: serializers.Serializer) -> Check:
    """Exactly its members: none unknown, every required one present, each checked; and
    `unique_items` (an array member to the member of its entries that must differ)."""
    fields = serializer.fields
    members = {name: compile_shape(member) for name, member in fields.items()}
    required = [name for name, member in fields.items() if member.required]
    unique_items = dict(getattr(serializer, "unique_items", {}))

    def check(obj: Any, where: str) -> Errors:
        if not isinstance(obj, dict):
            return _error(where, FieldErrorCode.INVALID_TYPE, "Must be an object.")
        prefix = f"{where}." if where else ""
        errors = [
            field_error(f"{prefix}{_member_label(name)}", FieldErrorCode.UNKNOWN_MEMBER, UNKNOWN)
            for name in obj
            if name not in members
        ]
        errors += [
            field_error(f"{prefix}{name}", FieldErrorCode.REQUIRED, "Member is required.")
            for name in required
            if name not in obj
        ]
        for name, member in members.items():
            if name in obj:
                errors += member(obj[name], f"{prefix}{name}")
        for name, key in unique_items.items():
            if isinstance(obj.get(name), list):
                errors += _duplicates(obj[name], key, f"{prefix}{name}")
        return errors

    return check


def _duplicates(items: list, key: str, where: str) -> Errors:
    seen: set[str] = set()
    errors = []
    for index, item in enumerate(items):
        value = item.get(key) if isinstance(item, dict) else None
        if not isinstance(value, str):
            continue
        if value in seen:
            errors += _error(
                f"{where}[{index}].{key}", FieldErrorCode.DUPLICATE, f"{key}s must be unique."
            )
        seen.add(value)
    return errors


def _text_or_object(text: Check, grant: Check) -> Check:
    def check(value: Any, where: str) -> Errors:
        if isinstance(value, str):
            return text(value, where)
        if isinstance(value, dict):
            return grant(value, where)
        message = "Must be a service identifier or an object."
        return _error(where, FieldErrorCode.INVALID_TYPE, message)

    return check


def compile_shape(field: serializers.Field) -> Check:
    """The check of what `field` (a serializer or one of its fields) describes."""
    if isinstance(field, GrantEntryField):
        return _text_or_object(compile_shape(field.text), compile_shape(field.grant))
    if isinstance(field, serializers.DateTimeField):
        return _moment
    if isinstance(field, serializers.ChoiceField):
        return _choice(tuple(str(choice) for choice in field.choices))
    if isinstance(field, serializers.ListField):
        return _array(compile_shape(field.child), field.min_length, field.max_length)
    if isinstance(field, serializers.ListSerializer) and field.child is not None:
        # DRF's ListSerializer has min_length and max_length; its stubs do not say so.
        low, high = field.min_length, field.max_length  # type: ignore[attr-defined]
        return _array(compile_shape(field.child), low, high)
    if isinstance(field, serializers.Serializer):
        return _object(field)
    if (
        isinstance(field, serializers.IntegerField)
        and field.min_value is not None
        and field.max_value is not None
    ):
        return _whole(field.min_value, field.max_value)
    if isinstance(field, serializers.CharField):
        return _text(field)
    if isinstance(field, serializers.BooleanField):
        return _boolean
    raise TypeError(f"no strict check for {type(field).__name__}")


def shape_errors(shape: Check, data: Any) -> Errors:
    """Every way `data` differs from `shape`, each naming its field; [] when it fits."""
    if not isinstance(data, dict):
        return _error("(body)", FieldErrorCode.INVALID_TYPE, "The body must be a JSON object.")
    return shape(data, "")


@cache
def _shape_of(serializer: type[serializers.Serializer]) -> Check:
    """Each shape compiled once, from the serializer the OpenAPI document states."""
    return compile_shape(serializer())


def checked(serializer: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """`data`, when it is of the shape `serializer` declares; else 400 naming every error."""
    errors = shape_errors(_shape_of(serializer), data)
    if errors:
        raise InvalidRequest(errors=errors)
    return data


def read_shape(
    request: Request, serializer: type[serializers.Serializer], *, optional: bool = False
) -> dict[str, Any]:
    """The request's JSON body, of the shape `serializer` declares. An `optional` body may be
    left out (no Content-Length, or 0): {} then, whatever the media type says."""
    if optional and request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        return {}
    return checked(serializer, read_json_body(request))


def parse_credential_input(data: Any) -> CredentialInput:
    """Check the document's shape exactly; collect every error before refusing."""
    document = checked(CredentialInputSerializer, data)
    return CredentialInput(
        service=document["service"],
        fields=OpenedSet(
            (entry["keyName"], Secret(entry["value"])) for entry in document["credentials"]
        ),
    )


def read_credential_input(request: Request) -> CredentialInput:
    return parse_credential_input(read_json_body(request))


def parse_grants(
    data: Any, shape: type[serializers.Serializer] = AgentInputSerializer
) -> list[Given]:
    """`{"services": [...]}` of a PUT of an agent (or the `services` of another `shape`, an
    access request's): each entry, a service identifier (the default grant) or an object, as a
    grant with the fields it came from. The grant rules themselves (one grant per service
    among them) are the business function's."""
    errors = shape_errors(_shape_of(shape), data)
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
                expires_at=parse_rfc3339(entry["expiresAt"]) if "expiresAt" in entry else None,
                approve=[
                    ApproveRule.given(methods=rule.get("methods"), paths=rule.get("paths"))
                    for rule in entry.get("approve", ())
                ],
            ),
            where,
            service_field,
        )
        for where, service_field, service, entry in named
    ]


def read_oauth_client(request: Request) -> tuple[str, Secret]:
    """`{clientId, clientSecret}`: the id, and the secret masked."""
    document = read_shape(request, OAuthClientInputSerializer)
    return document["clientId"], Secret(document["clientSecret"])


def read_connect_options(request: Request) -> tuple[list[str] | None, str | None]:
    """The optional `{scopes, service}` of a connect (an absent body: the defaults)."""
    document = read_shape(request, ConnectInputSerializer, optional=True)
    return document.get("scopes"), document.get("service")
