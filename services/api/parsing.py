"""The strict reader of the credential input (CONTRACT 4), used by test and store.

Order of refusals: 413 by the declared length (before anything is read), 415 by the media type,
400 `malformed_json` for anything that is not strict JSON (invalid UTF-8, syntax, duplicate
member names, NaN or Infinity, lone surrogates, nesting too deep to parse), then 400
`invalid_request` with field errors for a document of the wrong shape. No message holds a value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rest_framework.request import Request

from services.exceptions import (
    InvalidRequest,
    MalformedJSON,
    PayloadTooLarge,
    UnsupportedMediaType,
    field_error,
)
from services.identifiers import (
    SERVICE_RULE,
    InvalidIdentifier,
    is_key_name,
    normalize_service,
)
from services.masking import Secret

MAX_BODY_BYTES = 64 * 1024
MAX_CREDENTIALS = 20
MAX_VALUE_CHARS = 16_384

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


def _exact_members(obj: dict[str, Any], expected: tuple[str, ...], where: str) -> list[dict]:
    errors = []
    prefix = f"{where}." if where else ""
    for name in obj:
        if name not in expected:
            errors.append(
                field_error(
                    f"{prefix}{_member_label(name)}", "unknown_member", "Member not allowed."
                )
            )
    for name in expected:
        if name not in obj:
            errors.append(field_error(f"{prefix}{name}", "required", "Member is required."))
    return errors


def _entry_errors(index: int, entry: Any, seen: set[str]) -> list[dict]:
    where = f"credentials[{index}]"
    if not isinstance(entry, dict):
        return [field_error(where, "invalid_type", "Must be an object.")]
    errors = _exact_members(entry, ("keyName", "value"), where)
    key_name, value = entry.get("keyName"), entry.get("value")
    if "keyName" in entry:
        if not isinstance(key_name, str):
            errors.append(field_error(f"{where}.keyName", "invalid_type", "Must be a string."))
        elif not is_key_name(key_name):
            errors.append(
                field_error(
                    f"{where}.keyName",
                    "invalid",
                    "Must be lowercase snake case: a-z first, then a-z, 0-9 or _, at most 64.",
                )
            )
        elif key_name in seen:
            errors.append(field_error(f"{where}.keyName", "duplicate", "keyNames must be unique."))
        else:
            seen.add(key_name)
    if "value" in entry:
        if not isinstance(value, str):
            errors.append(field_error(f"{where}.value", "invalid_type", "Must be a string."))
        elif not value:
            errors.append(field_error(f"{where}.value", "too_short", "Must not be empty."))
        elif len(value) > MAX_VALUE_CHARS:
            errors.append(
                field_error(f"{where}.value", "too_long", f"At most {MAX_VALUE_CHARS} characters.")
            )
        elif "\x00" in value:
            errors.append(field_error(f"{where}.value", "invalid", "Must not contain NUL."))
    return errors


def parse_credential_input(data: Any) -> CredentialInput:
    """Check the document's shape exactly; collect every error before refusing."""
    if not isinstance(data, dict):
        raise InvalidRequest(
            errors=[field_error("(body)", "invalid_type", "The body must be a JSON object.")]
        )
    errors = _exact_members(data, ("service", "credentials"), "")
    service, credentials = data.get("service"), data.get("credentials")
    if "service" in data and not isinstance(service, str):
        errors.append(field_error("service", "invalid_type", "Must be a string."))
    if "credentials" in data:
        if not isinstance(credentials, list):
            errors.append(field_error("credentials", "invalid_type", "Must be an array."))
        elif not 1 <= len(credentials) <= MAX_CREDENTIALS:
            errors.append(
                field_error(
                    "credentials", "invalid_length", f"Must hold 1 to {MAX_CREDENTIALS} entries."
                )
            )
        else:
            seen: set[str] = set()
            for index, entry in enumerate(credentials):
                errors.extend(_entry_errors(index, entry, seen))
    if errors:
        raise InvalidRequest(errors=errors)
    return CredentialInput(
        service=service,
        fields=[(entry["keyName"], Secret(entry["value"])) for entry in credentials],
    )


def read_credential_input(request: Request) -> CredentialInput:
    return parse_credential_input(read_json_body(request))


MAX_GRANTS = 100
MAX_TOKEN_DAYS = 3650


def parse_grants(data: Any) -> list[str]:
    """`{"services": [...]}` of a PUT of an agent: the normalized services, deduplicated."""
    if not isinstance(data, dict):
        raise InvalidRequest(
            errors=[field_error("(body)", "invalid_type", "The body must be a JSON object.")]
        )
    errors = _exact_members(data, ("services",), "")
    services = data.get("services")
    normalized: list[str] = []
    if "services" in data:
        if not isinstance(services, list):
            errors.append(field_error("services", "invalid_type", "Must be an array."))
        elif len(services) > MAX_GRANTS:
            errors.append(
                field_error("services", "invalid_length", f"At most {MAX_GRANTS} services.")
            )
        else:
            for index, raw in enumerate(services):
                where = f"services[{index}]"
                if not isinstance(raw, str):
                    errors.append(field_error(where, "invalid_type", "Must be a string."))
                    continue
                try:
                    service = normalize_service(raw)
                except InvalidIdentifier:
                    errors.append(field_error(where, "invalid_service", SERVICE_RULE))
                    continue
                if service not in normalized:
                    normalized.append(service)
    if errors:
        raise InvalidRequest(errors=errors)
    return sorted(normalized)


def parse_token_request(request: Request) -> int | None:
    """The optional `{"expiresInDays": N}` of an agent-token request: N, or None when the
    body is empty or names no expiry."""
    if request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        return None  # no body: no options, whatever the media type says
    data = read_json_body(request)
    if not isinstance(data, dict):
        raise InvalidRequest(
            errors=[field_error("(body)", "invalid_type", "The body must be a JSON object.")]
        )
    errors = [e for e in _exact_members(data, ("expiresInDays",), "") if e["code"] != "required"]
    days = data.get("expiresInDays")
    if "expiresInDays" in data and (
        not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_TOKEN_DAYS
    ):
        errors.append(
            field_error(
                "expiresInDays", "invalid", f"A whole number of days from 1 to {MAX_TOKEN_DAYS}."
            )
        )
    if errors:
        raise InvalidRequest(errors=errors)
    return days
