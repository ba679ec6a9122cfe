"""The provider catalog: validated at load, held to the catalog rules, and every check proven
against a real HTTP server on 127.0.0.1 without a test written per provider."""

from __future__ import annotations

import base64
import json
import logging
import re
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from django.conf import settings

from providers import verification
from providers.catalog import (
    CATALOG_PATH,
    CatalogError,
    Check,
    Provider,
    Shape,
    catalog,
    parse_catalog,
)
from providers.listing import render_table
from services.management.commands.render_provider_table import END, PROVIDERS_DOC, START
from services.masking import Secret
from tests.support.helpers import CATALOG_ENTRY, marked

CHECKED = [
    (provider, index, shape)
    for provider in sorted(catalog().values(), key=lambda p: p.id)
    for index, shape in enumerate(provider.shapes)
    if shape.check is not None
]
IDS = [f"{provider.id}-{shape.key_type}-{index}" for provider, index, shape in CHECKED]


# --- loading and validation ------------------------------------------------------------------


def test_the_shipped_catalog_loads():
    assert parse_catalog(CATALOG_PATH.read_text()) == catalog()


def test_a_valid_entry_parses_and_matches_shapes():
    provider = parse_catalog(CATALOG_ENTRY)["example"]
    assert provider.shapes[0].check.path == "/me"
    assert provider.match(["api_key"]).shape is provider.shapes[0]
    mismatch = provider.match(["token"])
    assert mismatch.shape is None
    assert (mismatch.missing, mismatch.unexpected) == (("api_key",), ("token",))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('id = "example"', 'id = "Not Normal"'), "providers[0]: `id`"),
        (('category = "developer"', 'category = "misc"'), "'example': `category`"),
        (("https://api.example.com", "http://api.example.com"), "'example': `base_url`"),
        (("https://api.example.com", "https://{tenant}.example.com"), "`base_url`"),
        (('method = "GET"', 'method = "DELETE"'), "'example' shapes[0]: `check.method`"),
        (('method = "GET"', 'method = "POST"'), "needs `read_only`"),
        (('path = "/me"', 'path = "/me?key=1"'), "`check.path`"),
        (('path = "/me"', 'path = "/bot{api_key}/me"'), "`credential_in_url`"),
        (('field = "api_key"', 'field = "other"'), "keyName 'other'"),
        (('key_type = "api_key"', 'key_type = "password"'), "`key_type`"),
        (('key_type = "api_key"', 'key_type = "oauth"'), "requires access_token"),
        (('required = ["api_key"]', 'required = ["API"]'), "`required`"),
        (("https://docs.example.com/me", "ftp://x"), "`check.docs`"),
        (('docs = "https', 'acept_json = 1\ndocs = "https'), "unknown key `acept_json`"),
        (('name = "Example"', 'name = "Example"\nbase = "x"'), "unknown key `base`"),
    ],
)
def test_an_invalid_entry_names_entry_and_field(change, words):
    old, new = change
    assert old in CATALOG_ENTRY
    with pytest.raises(CatalogError) as raised:
        parse_catalog(CATALOG_ENTRY.replace(old, new, 1))
    assert words in str(raised.value)


def test_duplicate_ids_are_refused():
    with pytest.raises(CatalogError, match="appears twice"):
        parse_catalog(CATALOG_ENTRY + CATALOG_ENTRY)


def test_oauth_shapes_take_the_standard_optional_fields():
    shape = catalog()["github"].shapes[1]
    assert shape.key_type == "oauth"
    assert {"refresh_token", "expires_at", "scope"} <= shape.optional


OAUTH_BLOCK = """
[providers.oauth]
authorize_url = "https://example.com/oauth/authorize"
token_url = "https://example.com/oauth/token"
scopes = ["read"]
pkce = true
client_auth = "client_secret_post"
rotates_refresh_tokens = false
docs = "https://docs.example.com/oauth"
"""
OAUTH_SHAPE = """
[[providers.shapes]]
key_type = "oauth"
required = ["access_token"]
"""
WITH_OAUTH = CATALOG_ENTRY + OAUTH_SHAPE + OAUTH_BLOCK


def test_an_oauth_block_parses():
    oauth = parse_catalog(WITH_OAUTH)["example"].oauth
    assert oauth.token_url == "https://example.com/oauth/token"
    assert oauth.scopes == ("read",)
    assert oauth.scope_separator == " "
    assert oauth.pkce is True
    assert oauth.client_auth == "client_secret_post"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("https://example.com/oauth/token", "http://example.com/oauth/token"), "`token_url`"),
        (("https://example.com/oauth/authorize", "https://{t}.example.com/a"), "`authorize_url`"),
        (("https://example.com/oauth/token", "https://example.com/t?x=1"), "`token_url`"),
        (('client_auth = "client_secret_post"', 'client_auth = "none"'), "`client_auth`"),
        (("pkce = true", 'pkce = "yes"'), "`pkce`"),
        (('scopes = ["read"]', 'scopes = ["read write"]'), "`scopes`"),
        (("pkce = true", "pkce = true\nscope_separator = ';'"), "`scope_separator`"),
        (("pkce = true", 'pkce = true\nauthorize_params = { state = "x" }'), "`authorize_params`"),
        (("pkce = true", "pkce = true\nrefresh = 1"), "unknown key `refresh`"),
    ],
)
def test_an_invalid_oauth_block_names_entry_and_field(change, words):
    old, new = change
    assert old in WITH_OAUTH
    with pytest.raises(CatalogError) as raised:
        parse_catalog(WITH_OAUTH.replace(old, new, 1))
    assert "'example' oauth" in str(raised.value)
    assert words in str(raised.value)


def test_an_oauth_block_needs_an_oauth_shape():
    with pytest.raises(CatalogError, match="needs an oauth shape"):
        parse_catalog(CATALOG_ENTRY + OAUTH_BLOCK)


OAUTH_PROVIDERS = {
    "github",
    "google",
    "microsoft",
    "slack",
    "notion",
    "linear",
    "hubspot",
    "dropbox",
    "zoom",
    "atlassian",
    "salesforce",
    "gitlab",
    "discord",
    "figma",
    "asana",
}


def test_the_fifteen_providers_of_contract_12_have_oauth_and_keep_its_rules():
    with_oauth = {pid for pid, provider in catalog().items() if provider.oauth is not None}
    assert with_oauth >= OAUTH_PROVIDERS
    for provider_id in with_oauth:
        oauth = catalog()[provider_id].oauth
        for url in (oauth.authorize_url, oauth.token_url, oauth.docs):
            parts = urlsplit(url)
            assert parts.scheme == "https", (provider_id, url)
            assert parts.hostname, (provider_id, url)
            assert "{" not in url, (provider_id, url)
        assert not urlsplit(oauth.token_url).query, provider_id
        assert oauth.client_auth in ("client_secret_basic", "client_secret_post"), provider_id
    # PKCE where the provider supports it: the ones that document it say so.
    assert catalog()["google"].oauth.pkce is True
    assert catalog()["microsoft"].oauth.pkce is True


PATH_FIELDS_CHECK = (
    CATALOG_ENTRY.replace('required = ["api_key"]', 'required = ["api_key", "account_id"]')
    .replace('path = "/me"', 'path = "/accounts/{account_id}/me"')
    .replace(
        "[[providers.shapes]]",
        "[providers.fields]\naccount_id = { secret = false }\n\n[[providers.shapes]]",
    )
)


def test_an_identifier_fills_its_placeholder():
    provider = parse_catalog(PATH_FIELDS_CHECK)["example"]
    check = provider.shapes[0].check
    assert provider.identifiers == {"account_id"}
    assert check.path_fields == {"account_id"}
    assert not check.credential_in_url


@pytest.mark.parametrize(
    ("change", "words"),
    [
        # The secret never fills a placeholder: it would travel in the URL unflagged.
        (
            ('path = "/accounts/{account_id}/me"', 'path = "/accounts/{api_key}/me"'),
            "`credential_in_url`",
        ),
        # Nor a field that is not declared an identifier.
        (
            ("account_id = { secret = false }", "account_id = { secret = true }"),
            "`credential_in_url`",
        ),
        (('"/accounts/{account_id}/me"', '"/a/{account_id}/{account_id}"'), "named once"),
        # An identifier the set may lack could not fill the path.
        (
            (
                'required = ["api_key", "account_id"]',
                'required = ["api_key"]\noptional = ["account_id"]',
            ),
            "required identifier",
        ),
    ],
)
def test_an_invalid_path_placeholder_names_entry_and_field(change, words):
    old, new = change
    assert old in PATH_FIELDS_CHECK
    with pytest.raises(CatalogError) as raised:
        parse_catalog(PATH_FIELDS_CHECK.replace(old, new, 1))
    assert "'example'" in str(raised.value)
    assert words in str(raised.value)


def test_every_field_is_a_secret_unless_declared_an_identifier():
    assert parse_catalog(CATALOG_ENTRY)["example"].identifiers == frozenset()
    declared = parse_catalog(PATH_FIELDS_CHECK)["example"]
    assert declared.identifiers == {"account_id"}
    explicit = PATH_FIELDS_CHECK.replace(
        "account_id = { secret = false }",
        "account_id = { secret = false }\napi_key = { secret = true }",
    )
    assert parse_catalog(explicit)["example"].identifiers == {"account_id"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        # An unknown key stays an error: a typo would otherwise make a secret an identifier.
        (("{ secret = false }", "{ secret = false, shown = true }"), "unknown key `shown`"),
        (
            ("{ secret = false }", "{ secret = 0 }"),
            "`fields.account_id.secret` must be true or false",
        ),
        (("{ secret = false }", "{}"), "`fields.account_id.secret` must be true or false"),
        (
            ("account_id = { secret = false }", "account_id = false"),
            "`fields.account_id` must be a table",
        ),
        (("account_id = {", "Account = {"), "not a keyName"),
        (
            ("account_id = {", "other_id = { secret = false }\naccount_id = {"),
            "'other_id', a keyName no shape names",
        ),
        # The credential a check places is a secret, whatever the entry says.
        (("account_id = {", "api_key = {"), "places identifier 'api_key' as the credential"),
    ],
)
def test_an_invalid_field_declaration_names_entry_and_field(change, words):
    old, new = change
    assert old in PATH_FIELDS_CHECK
    with pytest.raises(CatalogError) as raised:
        parse_catalog(PATH_FIELDS_CHECK.replace(old, new, 1))
    assert "'example'" in str(raised.value)
    assert words in str(raised.value)


def test_oauth_tokens_and_client_secrets_are_never_identifiers():
    oauth_entry = WITH_OAUTH.replace(
        "[[providers.shapes]]",
        "[providers.fields]\nrefresh_token = { secret = false }\n\n[[providers.shapes]]",
        1,
    )
    with pytest.raises(CatalogError) as raised:
        parse_catalog(oauth_entry)
    assert "`fields.refresh_token` is a secret by its nature" in str(raised.value)


def test_a_basic_pair_may_hold_an_identifier_beside_its_secret_never_as_its_password():
    basic = (
        CATALOG_ENTRY.replace('required = ["api_key"]', 'required = ["email", "api_key"]')
        .replace(
            'auth = { type = "bearer", field = "api_key" }',
            'auth = { type = "basic", username = "email", password = "api_key" }',
        )
        .replace(
            "[[providers.shapes]]",
            "[providers.fields]\nemail = { secret = false }\n\n[[providers.shapes]]",
        )
    )
    assert parse_catalog(basic)["example"].shapes[0].check.auth.identifiers == {"email"}
    swapped = basic.replace(
        'username = "email", password = "api_key"', 'username = "api_key", password = "email"'
    )
    with pytest.raises(CatalogError) as raised:
        parse_catalog(swapped)
    assert "places identifier 'email' as the credential" in str(raised.value)


def test_a_refresh_url_of_its_own_parses_and_must_be_a_fixed_https_url():
    refreshing = WITH_OAUTH.replace(
        "scopes = [", 'refresh_url = "https://example.com/oauth/refresh"\nscopes = ['
    )
    assert parse_catalog(refreshing)["example"].oauth.refresh_url == (
        "https://example.com/oauth/refresh"
    )
    assert parse_catalog(WITH_OAUTH)["example"].oauth.refresh_url == ""
    with pytest.raises(CatalogError, match="`refresh_url`"):
        parse_catalog(refreshing.replace("https://example.com/oauth/refresh", "http://x/r"))


API_HOST = WITH_OAUTH.replace(
    'base_url = "https://api.example.com"',
    'base_url = "https://api.example.com"\n'
    'api_host_field = "instance_url"\n'
    'api_host_patterns = ["*.api.example.com"]',
).replace(
    'key_type = "oauth"\nrequired = ["access_token"]',
    'key_type = "oauth"\nrequired = ["access_token"]\noptional = ["refresh_token", "instance_url"]',
)


def test_a_connections_api_host_parses():
    provider = parse_catalog(API_HOST)["example"]
    assert provider.api_host.field == "instance_url"
    assert provider.api_host.patterns == ("*.api.example.com",)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('api_host_patterns = ["*.api.example.com"]', ""), "`api_host_patterns`"),
        (('api_host_field = "instance_url"\n', ""), "`api_host_field`"),
        (('"*.api.example.com"', '"*.com"'), "`api_host_patterns`"),
        (('"*.api.example.com"', '"https://x.example.com"'), "`api_host_patterns`"),
        (('"*.api.example.com"', '"x.*.example.com"'), "`api_host_patterns`"),
        (('api_host_patterns = ["*.api.example.com"]', "api_host_patterns = []"), "patterns"),
        (('api_host_field = "instance_url"', 'api_host_field = "Instance"'), "a keyName"),
        (('api_host_field = "instance_url"', 'api_host_field = "access_token"'), "OAuth fields"),
        (('api_host_field = "instance_url"', 'api_host_field = "api_host"'), "no shape names"),
    ],
)
def test_an_invalid_api_host_names_entry_and_field(change, words):
    old, new = change
    assert old in API_HOST
    with pytest.raises(CatalogError) as raised:
        parse_catalog(API_HOST.replace(old, new, 1))
    assert "'example'" in str(raised.value)
    assert words in str(raised.value)


@pytest.mark.parametrize(
    ("value", "base"),
    [
        ("https://acme.my.salesforce.com", "https://acme.my.salesforce.com"),
        ("https://acme.my.salesforce.com/", "https://acme.my.salesforce.com"),
        ("https://Acme.My.Salesforce.com:443", "https://acme.my.salesforce.com"),
        (
            "https://acme--dev.sandbox.my.salesforce.com",
            "https://acme--dev.sandbox.my.salesforce.com",
        ),
        ("http://acme.my.salesforce.com", None),
        ("https://my.salesforce.com", None),
        ("https://acme.my.salesforce.com.evil.example", None),
        ("https://evil.example/acme.my.salesforce.com", None),
        ("https://evil.example#.my.salesforce.com", None),
        ("https://evil.example?.my.salesforce.com", None),
        ("https://user@acme.my.salesforce.com", None),
        ("https://acme.my.salesforce.com:8443", None),
        ("https://acme.my.salesforce.com/services/data", None),
        ("https://acme.my.salesforce.com\n", None),
        ("https://-acme.my.salesforce.com", None),
        ("https://10.0.0.1", None),
        ("acme.my.salesforce.com", None),
        ("", None),
    ],
)
def test_a_connections_api_host_is_taken_only_as_https_and_a_matching_name(value, base):
    assert catalog()["salesforce"].api_host.base_url(value) == base


# --- provider facts, as their documentation gives them ----------------------------------------


def _entry_text(provider_id: str) -> str:
    """The catalog file's text of one provider's entry, comments included."""
    text = CATALOG_PATH.read_text(encoding="utf-8")
    start = text.index(f'\nid = "{provider_id}"\n')
    end = text.find("\n[[providers]]\n", start)
    return text[start : end if end != -1 else len(text)]


class TestProviderFacts:
    def test_figma_refreshes_at_its_own_url_and_keeps_the_refresh_token(self):
        oauth = catalog()["figma"].oauth
        assert oauth.rotates_refresh_tokens is False
        assert oauth.refresh_url == "https://api.figma.com/v1/oauth/refresh"

    def test_hubspot_takes_pkce_at_its_date_versioned_token_url(self):
        oauth = catalog()["hubspot"].oauth
        assert oauth.pkce is True
        assert oauth.token_url == "https://api.hubapi.com/oauth/2026-03/token"
        assert oauth.client_auth == "client_secret_post"

    def test_slack_is_sent_no_pkce(self):
        assert catalog()["slack"].oauth.pkce is False

    def test_bitbucket_takes_an_account_email_and_an_api_token(self):
        bitbucket = catalog()["bitbucket"]
        assert bitbucket.match(["username", "app_password"]).shape is None
        shape = bitbucket.match(["email", "api_token"]).shape
        assert (shape.check.auth.username, shape.check.auth.password) == ("email", "api_token")

    def test_twilio_checks_the_account_its_set_names(self):
        twilio = catalog()["twilio"]
        token = twilio.match(["account_sid", "auth_token"]).shape.check
        assert token.path == "/2010-04-01/Accounts/{account_sid}.json"
        key = twilio.match(["account_sid", "api_key_sid", "api_key_secret"]).shape.check
        # Not the Accounts resource, which a Standard API key may not read.
        assert key.path == "/2010-04-01/Accounts/{account_sid}/IncomingPhoneNumbers.json"
        assert token.path_fields == key.path_fields == {"account_sid"}

    @pytest.mark.parametrize(
        ("provider_id", "identifier"),
        [
            ("twilio", "account_sid"),
            ("jira", "email"),
            ("confluence", "email"),
            ("bitbucket", "email"),
            ("zendesk", "email"),
            ("salesforce", "instance_url"),
        ],
    )
    def test_names_that_answers_carry_are_identifiers(self, provider_id, identifier):
        assert catalog()[provider_id].identifiers == {identifier}

    @pytest.mark.parametrize(
        ("provider_id", "header", "value"),
        [
            ("klaviyo", "revision", "2026-10-15"),
            ("monday", "API-Version", "2026-10"),
            ("pinecone", "X-Pinecone-Api-Version", "2026-04"),
        ],
    )
    def test_api_versions_are_current_ones(self, provider_id, header, value):
        checks = [shape.check for shape in catalog()[provider_id].shapes if shape.check]
        assert checks
        assert {check.headers[header] for check in checks} == {value}

    def test_shopify_calls_a_supported_version(self):
        [shape] = catalog()["shopify"].shapes
        assert shape.check.path == "/admin/api/2026-10/shop.json"

    def test_salesforce_and_pipedrive_name_the_connections_api_host(self):
        salesforce, pipedrive = catalog()["salesforce"], catalog()["pipedrive"]
        assert salesforce.api_host.field == "instance_url"
        assert salesforce.api_host.patterns == ("*.my.salesforce.com",)
        assert pipedrive.api_host.field == "api_domain"
        assert pipedrive.api_host.patterns == ("*.pipedrive.com",)

    @pytest.mark.parametrize(
        ("provider_id", "sources"),
        [
            ("figma", ["https://arcticjs.dev/providers/figma", "could not be read"]),
            (
                "hubspot",
                [
                    "https://developers.hubspot.com/changelog/v1-oauth-api-deprecation",
                    "https://developers.hubspot.com/docs/api-reference/2026-03/authentication/"
                    "oauth-tokens/refresh-oauth-token",
                    "could not be read",
                ],
            ),
            ("slack", ["https://docs.slack.dev/authentication/using-pkce"]),
            ("bitbucket", ["https://support.atlassian.com/bitbucket-cloud/docs/using-api-tokens/"]),
            (
                "twilio",
                [
                    "https://www.twilio.com/docs/iam/api/account#fetch-an-account-resource",
                    "https://www.twilio.com/docs/iam/api-keys/key-resource-v1#types-of-keys",
                ],
            ),
            (
                "klaviyo",
                ["https://developers.klaviyo.com/en/docs/api_versioning_and_deprecation_policy"],
            ),
            (
                "monday",
                [
                    "https://developer.monday.com/api-reference/changelog/"
                    "2026-10-is-now-the-current-api-version"
                ],
            ),
            ("shopify", ["https://shopify.dev/docs/changelog/release-notes/2026-10", "could not"]),
            ("pinecone", ["https://docs.pinecone.io/reference/api/versioning", "could not be"]),
            (
                "salesforce",
                ["https://developer.salesforce.com/docs/platform/pkg2-dev/guide/"],
            ),
            (
                "pipedrive",
                [
                    "https://developers.pipedrive.com/changelog/post/"
                    "new-parameter-in-oauth-oauthtoken-responses"
                ],
            ),
        ],
    )
    def test_each_changed_value_names_its_source_or_says_it_is_unconfirmed(
        self, provider_id, sources
    ):
        entry = _entry_text(provider_id)
        for source in sources:
            assert source in entry, (provider_id, source)


# --- the catalog rules, over every entry -----------------------------------------------------


def test_every_entry_keeps_the_catalog_rules():
    flagged_in_url = set()
    for provider in catalog().values():
        if provider.per_customer:
            # A host that is the customer's own is never built from input: no fixed base URL,
            # a check only through the operator's server-side setting.
            assert provider.base_url is None, provider.id
            assert provider.base_url_example.startswith("https://"), provider.id
        else:
            parts = urlsplit(provider.base_url)
            assert parts.scheme == "https", provider.id
            assert parts.hostname
            assert "{" not in provider.base_url
            assert not parts.query
        for shape in provider.shapes:
            check = shape.check
            if check is None:
                continue
            where = f"{provider.id}/{shape.key_type}"
            # Read-only: GET, or a POST documented as read-only, with the reason written down.
            assert check.method == "GET" or (check.method == "POST" and check.read_only), where
            if check.body is not None:
                assert check.method == "POST", where
                assert "mutation" not in check.body.lower(), where
            # The credential stays out of the URL, but for flagged entries; a placeholder
            # elsewhere is a declared identifier of the set (Twilio's Account SID), never the
            # secret.
            if check.credential_in_url:
                flagged_in_url.add(provider.id)
                assert check.auth.type == "url", where
            else:
                placeholders = re.findall(r"\{([a-z_]+)\}", check.path)
                assert sorted(placeholders) == sorted(check.path_fields), where
                assert check.path_fields <= provider.identifiers, where
                assert not check.path_fields & {check.auth.field, check.auth.password}, where
                assert check.path_fields <= shape.required, where
                assert "{" not in re.sub(r"\{[a-z_]+\}", "", check.path), where
                assert check.auth.type in ("bearer", "header", "basic"), where
            assert "?" not in check.path, where
            assert "authorization" not in {name.lower() for name in check.headers}, where
            assert check.docs.startswith("https://"), where
            # Every keyName the check sends is one the shape requires.
            assert set(check.auth.fields) <= shape.required, where
    assert flagged_in_url == {"telegram"}


def test_at_least_sixty_providers_verify_at_a_fixed_host():
    verified = {
        provider.id
        for provider in catalog().values()
        if not provider.per_customer and any(shape.check for shape in provider.shapes)
    }
    assert len(verified) >= 60, len(verified)
    required = {
        "openai", "anthropic", "mistral", "cohere", "groq", "together", "deepseek", "xai",
        "openrouter", "huggingface", "replicate", "elevenlabs", "gemini", "github", "gitlab",
        "bitbucket", "vercel", "netlify", "cloudflare", "digitalocean", "heroku", "sentry",
        "datadog", "pagerduty", "linear", "notion", "airtable", "asana", "figma", "atlassian",
        "slack", "discord", "telegram", "twilio", "sendgrid", "mailgun", "postmark", "resend",
        "brevo", "stripe", "hubspot", "intercom", "klaviyo", "google", "microsoft", "dropbox",
        "zoom",
    }  # fmt: skip
    assert required <= verified, required - verified
    per_customer = {p.id for p in catalog().values() if p.per_customer}
    assert {"shopify", "zendesk", "jira"} <= per_customer


# --- every check against the local server ----------------------------------------------------


def _fields(shape: Shape) -> dict[str, Secret]:
    # Credentials of the shape's kind: printable, with characters a URL must encode.
    return {name: Secret(f"{marked(name)}:x") for name in sorted(shape.required)}


def _satisfying_body(check: Check) -> bytes:
    condition = check.accept_json
    if condition is None:
        return b'{"id": 1}'
    value = "x" if condition.present else condition.equals
    for step in reversed(condition.member.split(".")):
        value = {step: value}
    return json.dumps(value).encode()


def _expected_path(check: Check, fields: dict[str, Secret]) -> str:
    path = check.path
    for name in check.path_fields:
        path = path.replace("{" + name + "}", quote(fields[name].reveal(), safe=""))
    if not check.credential_in_url:
        return path
    value = quote(fields[check.auth.field].reveal(), safe=":")
    return path.replace("{" + check.auth.field + "}", value)


def _assert_placement(check: Check, fields: dict[str, Secret], headers: dict[str, str]) -> None:
    auth = check.auth
    lowered = {name.lower(): value for name, value in headers.items()}
    if auth.type == "bearer":
        assert lowered["authorization"] == f"Bearer {fields[auth.field].reveal()}"
    elif auth.type == "header":
        assert lowered[auth.header.lower()] == auth.prefix + fields[auth.field].reveal()
    elif auth.type == "basic":
        scheme, _, encoded = lowered["authorization"].partition(" ")
        user = fields[auth.username].reveal() if auth.username else auth.username_value
        password = fields[auth.password].reveal() if auth.password else ""
        assert scheme == "Basic"
        assert base64.b64decode(encoded).decode() == f"{user}:{password}"
    else:
        assert auth.type == "url"
        assert "authorization" not in lowered
        for value in lowered.values():
            assert fields[auth.field].reveal() not in value


@pytest.mark.parametrize(("provider", "index", "shape"), CHECKED, ids=IDS)
def test_every_check_sends_its_request_and_judges_the_answer(
    provider: Provider, index: int, shape: Shape, provider_server
):
    check = shape.check
    fields = _fields(shape)
    assert provider.match(fields).shape is shape

    provider_server.answer(200, _satisfying_body(check))
    assert verification.verify(provider.id, fields).reason == "accepted"
    [request] = provider_server.requests
    assert request.method == check.method
    assert request.path == _expected_path(check, fields)
    for name, value in check.headers.items():
        assert request.headers[name] == value
    _assert_placement(check, fields, request.headers)
    if check.body is not None:
        assert request.body == check.body.encode()
        assert request.headers["Content-Type"] == check.content_type

    for status in (401, 403):
        provider_server.answer(status, b'{"error": "bad credentials"}')
        assert verification.verify(provider.id, fields).reason == "rejected", status


@pytest.mark.parametrize(
    ("provider", "index", "shape"),
    [case for case in CHECKED if case[2].check.accept_json is not None],
    ids=[i for i, case in zip(IDS, CHECKED, strict=True) if case[2].check.accept_json],
)
def test_a_2xx_without_the_json_condition_is_not_accepted(provider, index, shape, provider_server):
    provider_server.answer(200, b'{"unrelated": true}')
    assert verification.verify(provider.id, _fields(shape)).reason == "rejected"


class TestPerCustomerHosts:
    def test_without_a_server_side_url_there_is_no_check(self, provider_server, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = "{}"
        fields = {"access_token": Secret("shpat_x")}
        assert verification.verify("shopify", fields).reason == "no_verifier"
        assert provider_server.requests == []

    def test_a_set_that_names_its_own_api_host_is_verifiable_without_one(self, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = "{}"
        salesforce, shopify = catalog()["salesforce"], catalog()["shopify"]
        assert verification.can_verify(salesforce, salesforce.shapes[0]) is True
        assert verification.can_verify(shopify, shopify.shapes[0]) is False
        fields = {"access_token": Secret("00D!x")}
        assert verification.verify("salesforce", fields).reason == "no_verifier"
        fields["instance_url"] = Secret("https://evil.example")
        assert verification.verify("salesforce", fields).reason == "no_verifier"

    def test_with_a_server_side_url_the_shop_is_checked(self, provider_server, settings):
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"shopify": provider_server.url})
        fields = {"access_token": Secret("shpat_x")}
        assert verification.verify("shopify", fields).reason == "accepted"
        assert provider_server.requests[0].path == "/admin/api/2026-10/shop.json"


def test_the_telegram_token_is_never_logged(provider_server, caplog):
    caplog.set_level(logging.DEBUG)
    token = "123456:" + marked("telegram")
    provider_server.answer(200, b'{"ok": true, "result": {}}')
    assert verification.verify("telegram", {"bot_token": Secret(token)}).reason == "accepted"
    assert provider_server.requests[0].path == f"/bot{token}/getMe"
    provider_server.answer(401, b'{"ok": false}')
    assert verification.verify("telegram", {"bot_token": Secret(token)}).reason == "rejected"
    assert token not in caplog.text
    assert token.split(":")[1] not in caplog.text


def test_a_credential_cannot_smuggle_a_path_into_the_url(provider_server):
    provider_server.answer(200, b'{"ok": true}')
    verdict = verification.verify("telegram", {"bot_token": Secret("1:a/../../admin")})
    assert verdict.reason == "accepted"
    assert provider_server.requests[0].path == "/bot1:a%2F..%2F..%2Fadmin/getMe"


# --- docs/providers.md ----------------------------------------------------------------------


def test_the_provider_table_of_the_docs_is_current():
    document = (Path(settings.BASE_DIR) / PROVIDERS_DOC).read_text(encoding="utf-8")
    assert START in document
    assert END in document
    section = document.split(START, 1)[1].split(END, 1)[0]
    assert section == "\n" + render_table(), (
        f"{PROVIDERS_DOC}'s provider table is stale: run "
        "`.venv/bin/python manage.py render_provider_table --write`"
    )


def test_the_providers_doc_lists_every_identifier_the_catalog_declares():
    """docs/providers.md's table of identifiers is the catalog's `secret = false` fields."""
    document = (Path(settings.BASE_DIR) / PROVIDERS_DOC).read_text(encoding="utf-8")
    section = document[document.index("## Secrets and identifiers") :]
    listed = set()
    for row in re.findall(r"^\| (`.*`) \| (`.*`) \|$", section, re.M):
        providers, fields = (re.findall(r"`([a-z0-9_-]+)`", cell) for cell in row)
        listed |= {(provider, field) for provider in providers for field in fields}
    declared = {(p.id, name) for p in catalog().values() for name in p.identifiers}
    assert listed == declared
