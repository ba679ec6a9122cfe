"""Service identifiers, keyNames and keyTypes."""

from __future__ import annotations

import pytest

from providers.identifiers import (
    KEY_NAME_PATTERN,
    InvalidIdentifier,
    key_type_for,
    normalize_service,
)
from tests.support.helpers import assert_problem, creds


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (" GitHub ", "github"),
        ("Google Drive", "google-drive"),
        ("my_api", "my-api"),
        ("\uff27\uff49\uff54\uff28\uff55\uff42", "github"),  # fullwidth "GitHub"
        ("a \t_ b", "a-b"),
        ("a__b", "a-b"),
        ("api.example.com", "api.example.com"),
        ("x", "x"),
        ("9", "9"),
        ("a" * 64, "a" * 64),
        ("\u2460", "1"),  # circled digit one, NFKC
        ("line\nbreak", "line-break"),  # a newline is whitespace
    ],
)
def test_normalization_examples(raw, normalized):
    assert normalize_service(raw) == normalized
    assert normalize_service(normalized) == normalized  # idempotent


@pytest.mark.parametrize(
    "raw",
    [
        "../etc",
        "",
        "   ",
        "a b/c",
        "-leading",
        "trailing-",
        "_x_",
        ".hidden",
        "a" * 65,
        "caf\u00e9",
        "https://evil.example",
        "null\x00byte",
        "İstanbul",
    ],
)
def test_bad_identifiers_are_rejected(raw):
    with pytest.raises(InvalidIdentifier):
        normalize_service(raw)


@pytest.mark.django_db
@pytest.mark.parametrize("raw", ["../etc", "", "a b/c"])
def test_bad_identifiers_are_400_naming_service(alice_api, raw):
    body = assert_problem(alice_api.store(raw, creds(api_key="v")), 400, "invalid_service")
    assert body["errors"][0]["field"] == "service"


@pytest.mark.django_db
def test_fullwidth_and_spaced_names_reach_the_same_service(alice_api):
    assert (
        alice_api.store("\uff27\uff49\uff54\uff28\uff55\uff42", creds(api_key="1")).status_code
        == 201
    )
    assert alice_api.store(" GitHub ", creds(api_key="2")).status_code == 200
    assert [s["service"] for s in alice_api.list().json()] == ["github"]


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("api_key", True),
        ("account_sid", True),
        ("a", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("Api_key", False),
        ("1key", False),
        ("_key", False),
        ("api-key", False),
        ("api key", False),
    ],
)
def test_key_names(name, valid):
    assert (KEY_NAME_PATTERN.fullmatch(name) is not None) is valid


@pytest.mark.parametrize(
    ("names", "key_type"),
    [
        (["api_key"], "api_key"),
        (["access_token"], "oauth"),
        (["refresh_token", "client_id"], "oauth"),
        (["client_id", "client_secret"], "api_key"),
    ],
)
def test_key_type(names, key_type):
    assert key_type_for(names) == key_type
