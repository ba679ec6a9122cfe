"""Every class of bad body (media type, size, strict JSON, shape), on both test and store:
refused, nothing stored, the earlier set untouched, and no value echoed back."""

from __future__ import annotations

import json

import pytest

from services.models import ConnectedService, CredentialField
from tests.support.helpers import assert_problem, creds

SECRET = "MARKED-SECRET-input-4f1d"
PATHS = {
    "store": ("PUT", "/api/v1/services/credentials"),
    "test": ("POST", "/api/v1/services/test"),
}


def body(**members: object) -> bytes:
    return json.dumps(members).encode()


def entry(key_name: object = "api_key", value: object = SECRET) -> dict:
    return {"keyName": key_name, "value": value}


GOOD = {"service": "custom", "credentials": [entry()]}

# (case id, raw body, status, code, field named in errors or None)
CASES = [
    ("syntax", b'{"service": "custom", "credentials": [', 400, "malformed_json", None),
    ("empty-body", b"", 400, "malformed_json", None),
    ("invalid-utf8", b'{"service": "cust\xff", "credentials": []}', 400, "malformed_json", None),
    ("utf8-bom", b"\xef\xbb\xbf" + body(**GOOD), 400, "malformed_json", None),
    (
        "duplicate-top-member",
        b'{"service": "a", "service": "b", "credentials": [{"keyName": "k", "value": "v"}]}',
        400,
        "malformed_json",
        None,
    ),
    (
        "duplicate-nested-member",
        b'{"service": "a", "credentials": [{"keyName": "k", "keyName": "j", "value": "v"}]}',
        400,
        "malformed_json",
        None,
    ),
    (
        "nan",
        b'{"service": "a", "credentials": [{"keyName": "k", "value": NaN}]}',
        400,
        "malformed_json",
        None,
    ),
    (
        "infinity",
        b'{"service": "a", "credentials": [{"keyName": "k", "value": -Infinity}]}',
        400,
        "malformed_json",
        None,
    ),
    (
        "lone-surrogate",
        b'{"service": "a", "credentials": [{"keyName": "k", "value": "x\\ud800y"}]}',
        400,
        "malformed_json",
        None,
    ),
    ("deep-nesting", b"[" * 30_000 + b"]" * 30_000, 400, "malformed_json", None),
    (
        "deep-object-nesting",
        b'{"service": "a", "credentials": ' + b'{"a":' * 9_000 + b"1" + b"}" * 9_000 + b"}",
        400,
        "malformed_json",
        None,
    ),
    ("array-body", b"[]", 400, "invalid_request", "(body)"),
    ("string-body", b'"custom"', 400, "invalid_request", "(body)"),
    ("missing-service", body(credentials=[entry()]), 400, "invalid_request", "service"),
    ("missing-credentials", body(service="custom"), 400, "invalid_request", "credentials"),
    (
        "unknown-url-member",
        body(**GOOD, baseUrl="http://127.0.0.1:9/steal"),
        400,
        "invalid_request",
        "baseUrl",
    ),
    (
        "service-not-string",
        body(service=7, credentials=[entry()]),
        400,
        "invalid_request",
        "service",
    ),
    (
        "credentials-object",
        body(service="a", credentials=entry()),
        400,
        "invalid_request",
        "credentials",
    ),
    ("credentials-empty", body(service="a", credentials=[]), 400, "invalid_request", "credentials"),
    (
        "credentials-21",
        body(service="a", credentials=[entry(f"k{i}") for i in range(21)]),
        400,
        "invalid_request",
        "credentials",
    ),
    (
        "entry-not-object",
        body(service="a", credentials=["x"]),
        400,
        "invalid_request",
        "credentials[0]",
    ),
    (
        "entry-extra-url-member",
        body(service="a", credentials=[{**entry(), "url": "https://example.com"}]),
        400,
        "invalid_request",
        "credentials[0].url",
    ),
    (
        "entry-missing-value",
        body(service="a", credentials=[{"keyName": "k"}]),
        400,
        "invalid_request",
        "credentials[0].value",
    ),
    (
        "keyname-not-snake",
        body(service="a", credentials=[entry("API-Key")]),
        400,
        "invalid_request",
        "credentials[0].keyName",
    ),
    (
        "keyname-not-string",
        body(service="a", credentials=[entry(1)]),
        400,
        "invalid_request",
        "credentials[0].keyName",
    ),
    (
        "keyname-duplicate",
        body(service="a", credentials=[entry("k"), entry("k")]),
        400,
        "invalid_request",
        "credentials[1].keyName",
    ),
    (
        "value-not-string",
        body(service="a", credentials=[entry(value=123)]),
        400,
        "invalid_request",
        "credentials[0].value",
    ),
    (
        "value-nested-object",
        body(service="a", credentials=[entry(value={"secret": SECRET})]),
        400,
        "invalid_request",
        "credentials[0].value",
    ),
    (
        "value-empty",
        body(service="a", credentials=[entry(value="")]),
        400,
        "invalid_request",
        "credentials[0].value",
    ),
    (
        "value-too-long",
        body(service="a", credentials=[entry(value=SECRET + "x" * 16_385)]),
        400,
        "invalid_request",
        "credentials[0].value",
    ),
    (
        "value-with-nul",
        body(service="a", credentials=[entry(value=SECRET + "\x00")]),
        400,
        "invalid_request",
        "credentials[0].value",
    ),
    (
        "service-url",
        body(service="https://evil.example", credentials=[entry()]),
        400,
        "invalid_service",
        "service",
    ),
    (
        "service-traversal",
        body(service="../etc", credentials=[entry()]),
        400,
        "invalid_service",
        "service",
    ),
    ("service-empty", body(service="", credentials=[entry()]), 400, "invalid_service", "service"),
    (
        "too-large",
        body(service="a", credentials=[entry(value="x" * 16_000)] * 5),
        413,
        "payload_too_large",
        None,
    ),
]


@pytest.fixture
def existing(alice_api, alice):
    """An earlier set that no refused request may touch."""
    assert alice_api.store("custom", creds(api_key="earlier")).status_code == 201
    return list(CredentialField.objects.values_list("pk", "ciphertext", "key_id"))


def assert_untouched(existing: list) -> None:
    assert list(CredentialField.objects.values_list("pk", "ciphertext", "key_id")) == existing
    assert list(ConnectedService.objects.values_list("service", "generation")) == [("custom", 1)]


@pytest.mark.django_db
@pytest.mark.parametrize("operation", ["store", "test"])
@pytest.mark.parametrize(
    ("case", "raw", "status", "code", "field"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_body_is_refused_and_nothing_is_stored(
    alice_api, existing, operation, case, raw, status, code, field
):
    method, path = PATHS[operation]
    response = alice_api.raw(method, path, raw)
    problem = assert_problem(response, status, code)
    if field is not None:
        assert field in {error["field"] for error in problem["errors"]}, problem
    assert SECRET not in response.content.decode("utf-8", "replace")
    assert_untouched(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("operation", ["store", "test"])
@pytest.mark.parametrize(
    "content_type",
    ["", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"],
)
def test_wrong_media_type_is_415(alice_api, existing, operation, content_type):
    method, path = PATHS[operation]
    response = alice_api.raw(method, path, body(**GOOD), content_type=content_type)
    assert_problem(response, 415, "unsupported_media_type")
    assert_untouched(existing)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", 'Application/JSON; charset="UTF-8"']
)
def test_utf8_charset_parameter_is_accepted(alice_api, content_type):
    response = alice_api.raw(
        "PUT", "/api/v1/services/credentials", body(**GOOD), content_type=content_type
    )
    assert response.status_code == 201


@pytest.mark.django_db
def test_size_is_refused_before_the_body_is_read(alice_api, monkeypatch):
    """413 comes from Content-Length alone: the body is never read or parsed."""
    from django.core.handlers.wsgi import WSGIRequest

    def never(self):
        raise AssertionError("the body was read")

    monkeypatch.setattr(WSGIRequest, "body", property(never))
    response = alice_api.raw("PUT", "/api/v1/services/credentials", b"x" * (64 * 1024 + 1))
    assert_problem(response, 413, "payload_too_large")


@pytest.mark.django_db
def test_body_of_exactly_64_kib_is_read(alice_api):
    padding = 64 * 1024 - len(body(**{**GOOD, "credentials": [entry(value="")]}))
    raw = body(**{**GOOD, "credentials": [entry(value="v" * padding)]})
    assert len(raw) == 64 * 1024
    response = alice_api.raw("PUT", "/api/v1/services/credentials", raw)
    # Within the size limit, refused only for the value's own length limit.
    problem = assert_problem(response, 400, "invalid_request")
    assert problem["errors"][0]["code"] == "too_long"


@pytest.mark.django_db
def test_every_error_of_a_body_is_reported_at_once(alice_api):
    raw = body(service=1, credentials=[entry("Bad"), entry(value=""), "x"], extra=True)
    problem = assert_problem(
        alice_api.raw("PUT", "/api/v1/services/credentials", raw), 400, "invalid_request"
    )
    fields = {error["field"] for error in problem["errors"]}
    assert fields == {
        "extra",
        "service",
        "credentials[0].keyName",
        "credentials[1].value",
        "credentials[2]",
    }


@pytest.fixture
def documented() -> dict:
    """The request shapes of the OpenAPI document the server serves."""
    from django.test import Client

    return (
        Client()
        .get("/api/v1/schema", HTTP_ACCEPT="application/json")
        .json()["components"]["schemas"]
    )


@pytest.mark.django_db
def test_the_documented_limits_are_the_enforced_ones(alice_api, documented):
    """One definition of the shape (services/api/serializers.py) documents and validates."""
    most = documented["CredentialInput"]["properties"]["credentials"]["maxItems"]
    longest = documented["CredentialEntry"]["properties"]["value"]["maxLength"]
    pattern = documented["CredentialEntry"]["properties"]["keyName"]["pattern"]
    assert (most, longest, pattern) == (20, 16384, "^[a-z][a-z0-9_]{0,63}$")
    at_most = [entry(f"k{i}", "v") for i in range(most)]
    assert alice_api.raw("PUT", PATHS["store"][1], body(service="a", credentials=at_most))
    for raw, field, code in [
        (body(service="a", credentials=[*at_most, entry("over")]), "credentials", "invalid_length"),
        (
            body(service="a", credentials=[entry(value="v" * (longest + 1))]),
            "credentials[0].value",
            "too_long",
        ),
        (body(service="a", credentials=[entry("K")]), "credentials[0].keyName", "invalid"),
    ]:
        problem = assert_problem(
            alice_api.raw("PUT", PATHS["store"][1], raw), 400, "invalid_request"
        )
        assert (problem["errors"][0]["field"], problem["errors"][0]["code"]) == (field, code)
    ok = alice_api.raw(
        "PUT", PATHS["store"][1], body(service="b", credentials=[entry(value="v" * longest)])
    )
    assert ok.status_code == 201


@pytest.mark.django_db
def test_the_documented_agent_limits_are_the_enforced_ones(alice_api, documented):
    most = documented["AgentInput"]["properties"]["services"]["maxItems"]
    days = documented["AgentTokenInput"]["properties"]["expiresInDays"]["maximum"]
    assert (most, days) == (100, 3650)
    grants = [f"svc-{i}" for i in range(most)]
    assert alice_api.raw("PUT", "/api/v1/agents/bot", body(services=grants)).status_code == 201
    over = alice_api.raw("PUT", "/api/v1/agents/bot", body(services=[*grants, "one-more"]))
    assert assert_problem(over, 400, "invalid_request")["errors"][0]["code"] == "invalid_length"
    tokens = "/api/v1/agents/bot/tokens"
    assert alice_api.raw("POST", tokens, body(expiresInDays=days)).status_code == 201
    late = alice_api.raw("POST", tokens, body(expiresInDays=days + 1))
    assert assert_problem(late, 400, "invalid_request")["errors"][0]["field"] == "expiresInDays"
