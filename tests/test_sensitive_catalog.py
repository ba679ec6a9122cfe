"""The catalog's sensitive endpoints: every provider was considered (a list, or a sentence saying
why there is none), every entry carries its docs page, the penetration test's calls are refused
to a default grant and allowed to one that names them, and an invalid entry stops the load with
an error naming the field."""

from __future__ import annotations

import pytest

from providers.catalog import CatalogError, catalog, parse_catalog
from providers.sensitive import refused

PROVIDERS = sorted(catalog().values(), key=lambda provider: provider.id)

# The providers the rule names: each lists its endpoints.
NAMED = (
    "github", "gitlab", "openai", "anthropic", "stripe",
    "twilio", "slack", "cloudflare", "sendgrid", "vercel",
)  # fmt: skip

# The penetration test's findings, one call each, as an agent would send them (paths below the
# provider's base URL as the catalog has it).
PEN_TEST = [
    ("twilio", "POST", "/2010-04-01/Accounts/AC123/Keys.json"),
    ("twilio", "POST", "/2010-04-01/Accounts/AC123/Keys"),
    ("twilio", "POST", "/2010-04-01/Accounts/AC123/SigningKeys.json"),
    ("twilio", "POST", "/2010-04-01/Accounts.json"),
    ("github", "POST", "/user/keys"),
    ("github", "POST", "/authorizations"),
    ("gitlab", "POST", "/api/v4/user/personal_access_tokens"),
    ("gitlab", "POST", "/api/v4/projects/42/access_tokens"),
    ("openai", "POST", "/v1/organization/admin_api_keys"),
    ("openai", "POST", "/v1/organization/projects/proj_1/service_accounts"),
    ("anthropic", "POST", "/v1/organizations/api_keys/apikey_01"),
    ("stripe", "POST", "/v1/ephemeral_keys"),
    ("stripe", "POST", "/v1/webhook_endpoints"),
    ("slack", "POST", "/api/oauth.v2.access"),
    ("slack", "GET", "/api/apps.manifest.create"),
    ("cloudflare", "POST", "/client/v4/user/tokens"),
    ("cloudflare", "POST", "/client/v4/accounts/0123abcd/tokens"),
    ("sendgrid", "POST", "/v3/api_keys"),
    ("vercel", "POST", "/v3/user/tokens"),
]

# Ordinary calls of the same providers stay open to a default grant.
ORDINARY = [
    ("twilio", "POST", "/2010-04-01/Accounts/AC123/Messages.json"),
    ("twilio", "GET", "/2010-04-01/Accounts/AC123/IncomingPhoneNumbers.json"),
    ("github", "GET", "/user/keys"),
    ("github", "POST", "/repos/o/r/issues"),
    ("gitlab", "GET", "/api/v4/user"),
    ("openai", "POST", "/v1/chat/completions"),
    ("anthropic", "POST", "/v1/messages"),
    ("stripe", "POST", "/v1/payment_intents"),
    ("slack", "POST", "/api/chat.postMessage"),
    ("slack", "GET", "/api/auth.test"),
    ("cloudflare", "GET", "/client/v4/user/tokens/verify"),
    ("sendgrid", "POST", "/v3/mail/send"),
    ("vercel", "GET", "/v6/deployments"),
]


# --- every provider considered ---------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda provider: provider.id)
def test_every_provider_lists_its_sensitive_endpoints_or_says_why_it_has_none(provider):
    assert bool(provider.sensitive) != bool(provider.sensitive_none.strip()), provider.id


def test_a_reason_for_none_names_the_page_that_says_so():
    for provider in PROVIDERS:
        if provider.sensitive_none:
            assert "https://" in provider.sensitive_none, provider.id


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda provider: provider.id)
def test_every_listed_entry_carries_its_docs_page(provider):
    for endpoint in provider.sensitive:
        assert endpoint.docs.startswith("https://"), (provider.id, endpoint.path)
        assert endpoint.why.strip(), (provider.id, endpoint.path)
        assert endpoint.path.startswith("/"), (provider.id, endpoint.path)


@pytest.mark.parametrize("provider_id", NAMED)
def test_the_named_providers_each_list_their_endpoints(provider_id):
    assert catalog()[provider_id].sensitive, provider_id


# --- the penetration test's calls ------------------------------------------------------------


@pytest.mark.parametrize(("provider_id", "method", "path"), PEN_TEST)
def test_the_pen_tests_calls_are_refused_to_a_default_grant(provider_id, method, path):
    endpoints = catalog()[provider_id].sensitive
    assert refused(endpoints, method=method, path=path, prefixes=["/"]) is not None


@pytest.mark.parametrize(("provider_id", "method", "path"), PEN_TEST)
def test_a_grant_that_names_the_path_is_not_refused(provider_id, method, path):
    endpoints = catalog()[provider_id].sensitive
    assert refused(endpoints, method=method, path=path, prefixes=[path]) is None


@pytest.mark.parametrize(("provider_id", "method", "path"), PEN_TEST)
def test_a_grant_that_stops_short_of_the_endpoint_names_nothing(provider_id, method, path):
    endpoints = catalog()[provider_id].sensitive
    endpoint = refused(endpoints, method=method, path=path, prefixes=["/"])
    depth = len(endpoint.path.strip("/").split("/"))
    shorter = "/" + "/".join(path.strip("/").split("/")[: depth - 1])
    assert refused(endpoints, method=method, path=path, prefixes=[shorter, "/"]) is not None


@pytest.mark.parametrize(("provider_id", "method", "path"), ORDINARY)
def test_ordinary_calls_stay_open_to_a_default_grant(provider_id, method, path):
    endpoints = catalog()[provider_id].sensitive
    assert refused(endpoints, method=method, path=path, prefixes=["/"]) is None


def test_matching_ignores_case_and_covers_what_lies_below():
    twilio = catalog()["twilio"].sensitive
    for path in ("/2010-04-01/accounts/AC123/keys.json", "/2010-04-01/Accounts/AC123/Keys/SK1"):
        assert refused(twilio, method="POST", path=path, prefixes=["/"]) is not None


# --- validated at load -----------------------------------------------------------------------

ENTRY = """
[[providers]]
id = "example"
name = "Example"
category = "developer"
base_url = "https://api.example.com"
{top}
[[providers.shapes]]
key_type = "api_key"
required = ["api_key"]
[providers.shapes.check]
method = "GET"
path = "/me"
auth = {{ type = "bearer", field = "api_key" }}
docs = "https://docs.example.com/me"
{tables}
"""

SENSITIVE = """
[[providers.sensitive]]
methods = ["POST"]
path = "/keys"
why = "creates an API key"
docs = "https://docs.example.com/keys"
"""

NONE = 'sensitive_none = "The API has no such endpoint (https://docs.example.com/api)."'


def _entry(*, top: str = "", tables: str = "") -> str:
    return ENTRY.format(top=top, tables=tables)


def test_a_list_or_a_reason_parses():
    listed = parse_catalog(_entry(tables=SENSITIVE))["example"]
    assert [(e.methods, e.path) for e in listed.sensitive] == [(("POST",), "/keys")]
    reasoned = parse_catalog(_entry(top=NONE))["example"]
    assert (reasoned.sensitive, reasoned.sensitive_none.startswith("The API")) == ((), True)


@pytest.mark.parametrize(
    ("top", "tables", "words"),
    [
        (NONE, SENSITIVE, "give `sensitive` or `sensitive_none`, not both"),
        ("", "", "`sensitive_none`"),
        ('sensitive_none = "  "', "", "`sensitive_none` must be a sentence"),
        ("", SENSITIVE.replace('docs = "https://docs.example.com/keys"\n', ""), "`docs`"),
        ("", SENSITIVE.replace("https://docs.example.com/keys", "http://x/keys"), "`docs`"),
        ("", SENSITIVE.replace('["POST"]', '["FETCH"]'), "`methods`"),
        ("", SENSITIVE.replace('["POST"]', "[]"), "`methods`"),
        ("", SENSITIVE.replace('path = "/keys"', 'path = "keys"'), "`path`"),
        ("", SENSITIVE.replace('why = "creates an API key"\n', ""), "`why`"),
        ("", SENSITIVE + 'note = "x"\n', "unknown field 'note'"),
    ],
)
def test_an_invalid_entry_is_refused_at_load_naming_the_field(top, tables, words):
    with pytest.raises(CatalogError) as raised:
        parse_catalog(_entry(top=top, tables=tables))
    message = str(raised.value)
    assert "provider 'example'" in message
    assert words in message


def test_a_built_in_entry_that_considered_nothing_is_refused_naming_both_fields():
    with pytest.raises(CatalogError) as raised:
        parse_catalog(_entry())
    assert "`sensitive`" in str(raised.value)
    assert "`sensitive_none`" in str(raised.value)


def test_an_operators_entry_may_leave_both_out():
    provider = parse_catalog(_entry(), source="extra.toml", operator=True)["example"]
    assert (provider.sensitive, provider.sensitive_none, provider.operator) == ((), "", True)
    with pytest.raises(CatalogError, match="not both"):
        parse_catalog(_entry(top=NONE, tables=SENSITIVE), operator=True)
