"""The provider catalog data file: validated at load, with errors naming entry and field."""

from __future__ import annotations

import pytest

from providers.catalog import CATALOG_PATH, CatalogError, catalog, parse_catalog

VALID = """
[[providers]]
id = "example"
name = "Example"
base_url = "https://api.example.com"
[[providers.shapes]]
key_type = "api_key"
required = ["api_key"]
[providers.shapes.check]
method = "GET"
path = "/me"
auth = { type = "bearer", field = "api_key" }
docs = "https://docs.example.com/me"
"""


def test_the_shipped_catalog_loads():
    providers = parse_catalog(CATALOG_PATH.read_text())
    assert providers == catalog()
    for provider in providers.values():
        assert provider.base_url.startswith("https://")
        for shape in provider.shapes:
            if shape.check:
                assert shape.check.method in ("GET", "POST")
                assert shape.check.docs.startswith("https://")


def test_a_valid_entry_parses():
    provider = parse_catalog(VALID)["example"]
    assert provider.shapes[0].check.path == "/me"
    assert provider.match(["api_key"]).shape is provider.shapes[0]
    mismatch = provider.match(["token"])
    assert mismatch.shape is None
    assert (mismatch.missing, mismatch.unexpected) == (("api_key",), ("token",))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('id = "example"', 'id = "Not Normal"'), "providers[0]: `id`"),
        (
            ('base_url = "https://api.example.com"', 'base_url = "http://api.example.com"'),
            "'example': `base_url`",
        ),
        (('method = "GET"', 'method = "DELETE"'), "'example' shapes[0]: `check.method`"),
        (('path = "/me"', 'path = "/me?key=1"'), "`check.path`"),
        (('field = "api_key"', 'field = "other"'), "keyName 'other'"),
        (('key_type = "api_key"', 'key_type = "password"'), "`key_type`"),
        (('required = ["api_key"]', 'required = ["API"]'), "`required`"),
        (('docs = "https://docs.example.com/me"', 'docs = "ftp://x"'), "`check.docs`"),
    ],
)
def test_an_invalid_entry_names_entry_and_field(change, words):
    old, new = change
    with pytest.raises(CatalogError) as raised:
        parse_catalog(VALID.replace(old, new))
    assert words in str(raised.value)


def test_duplicate_ids_are_refused():
    with pytest.raises(CatalogError, match="appears twice"):
        parse_catalog(VALID + VALID)
