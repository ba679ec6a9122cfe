"""The catalog's sensitive endpoints: every provider was considered (a list, or a sentence saying
why there is none), every entry carries its docs page, the penetration test's calls are refused
to a default grant and allowed to one that names them, and an invalid entry stops the load with
an error naming the field."""

from __future__ import annotations

from fnmatch import fnmatchcase
from urllib.parse import unquote

import pytest

from providers import sensitive
from providers.catalog import CatalogError, catalog, parse_catalog
from providers.sensitive import refused
from services.broker.paths import checked_path
from tests.support.helpers import (
    PROXY_PREFIX as PROXY,
)
from tests.support.helpers import (
    agent_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)

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
    # Beside the endpoints that widen access: the same APIs' ordinary work.
    ("github", "PUT", "/repos/o/r/contents/README.md"),
    ("github", "GET", "/repos/o/r/contents/.github/workflows/ci.yml"),
    ("github", "GET", "/repos/o/r/git/refs/heads/main"),
    ("github", "POST", "/repos/o/r/git/trees"),
    ("github", "POST", "/repos/o/r/git/commits"),
    ("github", "GET", "/orgs/acme/teams/core/members"),
    ("gitlab", "PUT", "/api/v4/projects/42/repository/files/README.md"),
    ("gitlab", "GET", "/api/v4/projects/42/repository/files/.gitlab-ci.yml"),
    ("gitlab", "GET", "/api/v4/projects/42/members"),
    ("gitlab", "POST", "/api/v4/projects/42/issues"),
    ("microsoft", "POST", "/v1.0/me/sendMail"),
    ("microsoft", "PUT", "/v1.0/me/drive/root:/a.txt:/content"),
    ("microsoft", "GET", "/v1.0/me/drive/items/i1/permissions"),
    ("slack", "POST", "/api/conversations.history"),
    ("zendesk", "POST", "/api/v2/tickets.json"),
    ("salesforce", "POST", "/services/data/v61.0/sobjects/Account"),
    ("dropbox", "POST", "/2/sharing/list_folders"),
    ("google", "GET", "/storage/v1/b/acme/iam"),
    # Below an `exact` entry: the resource's daily work.
    ("github", "PATCH", "/repos/o/r/issues/1"),
    ("github", "PATCH", "/orgs/acme/teams/core"),
    ("gitlab", "PUT", "/api/v4/projects/42/issues/1"),
    ("box", "PUT", "/2.0/files/123/metadata/global/properties"),
    ("miro", "PATCH", "/v2/boards/b1/sticky_notes/s1"),
    ("zoom", "POST", "/v2/users/me/meetings"),
    ("microsoft", "POST", "/v1.0/users/u1/sendMail"),
    ("microsoft", "PATCH", "/v1.0/users/u1/messages/m1"),
    ("render", "POST", "/v1/services/srv-1/deploys"),
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
    assert [(e.methods, e.path, e.exact) for e in listed.sensitive] == [(("POST",), "/keys", False)]
    exact = parse_catalog(_entry(tables=SENSITIVE + "exact = true\n"))["example"]
    assert [e.exact for e in exact.sensitive] == [True]
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
        ("", SENSITIVE + 'exact = "yes"\n', "`exact` must be true or false"),
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


# --- endpoints that widen access --------------------------------------------------------------


def _reached(provider_id: str, method: str, raw: str, prefixes: list[str]):
    """What `refused` says of a call as the broker reads it: the raw path checked and decoded
    segment by segment, both readings of an encoded `/` given."""
    path = checked_path(raw)
    endpoints = catalog()[provider_id].sensitive
    return refused(
        endpoints, method=method, path=path.text, segments=path.segments, prefixes=prefixes
    )


class TestPathReadings:
    """An encoded `/` is read as a separator and inside its segment, a `%2E` as the dot it
    decodes to, and a `**` segment spans any number of segments."""

    @pytest.mark.parametrize(
        "raw",
        [
            "/api/v4/projects/42/access_tokens",
            "/api/v4/projects/acme%2Fapp/access_tokens",
            "/api/v4/projects/acme%2Fplatform%2Fapp/access_tokens",
            "/api/v4/groups/acme%2Fplatform/variables/KEY",
        ],
    )
    def test_a_namespaced_gitlab_id_is_one_project(self, raw):
        method = "GET" if "variables" in raw else "POST"
        assert _reached("gitlab", method, raw, ["/"]) is not None

    @pytest.mark.parametrize(
        "raw",
        [
            "/api/v4/projects/42/repository/files/.gitlab-ci.yml",
            "/api/v4/projects/42/repository/files/%2Egitlab-ci%2Eyml",
            "/api/v4/projects/42/repository/files/%2egitlab-ci.yml/raw",
            "/api/v4/projects/acme%2Fapp/repository/files/%2Egitlab-ci%2Eyml",
            "/api/v4/projects/42/repository/files/.gitlab%2Fci%2Fdeploy.yml",
            "/api/v4/projects/acme%2Fapp/repository/files/.gitlab%2Fci%2Fdeploy.yml",
        ],
    )
    def test_gitlabs_ci_definition_is_refused_however_spelled(self, raw):
        assert _reached("gitlab", "PUT", raw, ["/"]) is not None

    @pytest.mark.parametrize(
        "raw",
        [
            "/repos/acme/app/contents/.github/workflows/ci.yml",
            "/repos/acme/app/contents/.github%2Fworkflows%2Fci.yml",
            "/repos/acme/app/contents/%2Egithub/workflows/ci.yml",
            "/repos/acme/app/contents/.GITHUB/Workflows/ci.yml",
        ],
    )
    def test_githubs_workflows_are_refused_however_spelled(self, raw):
        assert _reached("github", "PUT", raw, ["/"]) is not None

    @pytest.mark.parametrize(
        ("provider_id", "raw"),
        [
            ("gitlab", "/api/v4/projects/acme%2Fapp/repository/files/README.md"),
            ("gitlab", "/api/v4/projects/42/repository/files/src%2Fgitlab.py"),
            ("github", "/repos/acme/app/contents/docs/workflows.md"),
            ("github", "/repos/acme/app/contents/.github/CODEOWNERS"),
        ],
    )
    def test_other_files_stay_open(self, provider_id, raw):
        assert _reached(provider_id, "PUT", raw, ["/"]) is None

    @pytest.mark.parametrize(
        "raw",
        [
            "/v1.0/me/drive/items/01AB/invite",
            "/v1.0/drives/b!x/items/01AB/invite",
            "/beta/sites/s1/drives/d1/items/01AB/invite",
            "/v1.0/me/drive/root:/Reports/2026/q3.xlsx:/invite",
            "/v1.0/users/u1/drive/root:/a.txt:/invite",
        ],
    )
    def test_a_double_star_covers_an_item_addressed_by_id_or_by_path(self, raw):
        assert _reached("microsoft", "POST", raw, ["/"]) is not None
        assert _reached("microsoft", "POST", raw, [raw]) is None
        assert _reached("microsoft", "GET", raw, ["/"]) is None

    def test_an_exact_entry_is_named_by_its_own_path_only(self):
        raw = "/repos/acme/app"
        assert _reached("github", "PATCH", raw, ["/", "/repos/acme/app/issues"]) is not None
        assert _reached("github", "PATCH", raw, ["/repos/acme"]) is not None
        assert _reached("github", "PATCH", raw, ["/repos/acme/app"]) is None
        assert _reached("github", "PATCH", "/repos/acme/app/", ["/"]) is not None
        assert _reached("github", "PATCH", "/repos/acme%2Fapp", ["/"]) is not None

    def test_a_double_star_in_a_long_path_costs_one_match_per_segment_and_part(self, monkeypatch):
        raw = "/v1.0/me/drive" + "/drive" * 300 + "/x"
        matched = []
        monkeypatch.setattr(
            sensitive, "fnmatchcase", lambda name, pat: matched.append(1) or fnmatchcase(name, pat)
        )
        assert _reached("microsoft", "POST", raw, ["/"]) is None
        parts = sum(len(e.path.strip("/").split("/")) for e in catalog()["microsoft"].sensitive)
        segments = raw.count("/")
        assert 0 < len(matched) <= parts * (segments + 1) * 2  # two readings of the path

    @pytest.mark.parametrize(
        ("raw", "prefix"),
        [
            ("/api/v4/projects/acme%2Fapp/repository/files/%2Egitlab-ci%2Eyml", None),
            (
                "/api/v4/projects/acme%2Fapp/repository/files/%2Egitlab-ci%2Eyml",
                "/api/v4/projects/acme%2Fapp/repository/files/.gitlab-ci.yml",
            ),
            (
                "/api/v4/projects/acme%2Fapp/repository/files/.gitlab-ci.yml",
                "/api/v4/projects/acme%2Fapp/repository/files/%2Egitlab-ci%2Eyml",
            ),
            ("/api/v4/projects/acme%2Fapp/access_tokens", None),
        ],
    )
    def test_a_grant_names_the_path_in_either_spelling(self, raw, prefix):
        assert _reached("gitlab", "POST", raw, [prefix or raw]) is None
        shorter = "/api/v4/projects/acme%2Fapp/repository"
        assert _reached("gitlab", "POST", raw, [shorter]) is not None


# One call per kind of widening per provider, as an agent sends it (`raw`: the request target
# kept percent-encoded, as gunicorn hands it on).
WIDENING = [
    # provider, what it widens, method, path as sent
    ("github", "invitation", "POST", "/orgs/acme/invitations"),
    ("github", "team membership", "PUT", "/orgs/acme/teams/core/memberships/mallory"),
    ("github", "outside collaborator", "PUT", "/orgs/acme/outside_collaborators/mallory"),
    ("github", "collaborator", "PUT", "/repos/acme/app/collaborators/mallory"),
    ("github", "team repository permission", "PUT", "/orgs/acme/teams/core/repos/acme/app"),
    ("github", "transfer", "POST", "/repos/acme/app/transfer"),
    ("github", "workflow", "PUT", "/repos/acme/app/contents/.github/workflows/ci.yml"),
    ("github", "workflow, encoded", "PUT", "/repos/acme/app/contents/.github%2Fworkflows%2Fx.yml"),
    ("github", "workflow, dot encoded", "DELETE", "/repos/acme/app/contents/%2Egithub/workflows/x"),
    ("github", "branch moved", "PATCH", "/repos/acme/app/git/refs/heads/main"),
    ("github", "workflow token", "PUT", "/repos/acme/app/actions/permissions/workflow"),
    ("github", "oidc subject", "PUT", "/repos/acme/app/actions/oidc/customization/sub"),
    ("github", "environment reviewers", "PUT", "/repos/acme/app/environments/production"),
    ("github", "deploy key, by repository id", "POST", "/repositories/1296269/keys"),
    ("github", "workflow, by repo id", "PUT", "/repositories/1296269/contents/.github/workflows/x"),
    ("github", "invitation, by organization id", "POST", "/organizations/9919/invitations"),
    ("gitlab", "membership", "POST", "/api/v4/projects/42/members"),
    ("gitlab", "membership, by path", "POST", "/api/v4/groups/acme%2Fplatform/members"),
    ("gitlab", "invitation", "POST", "/api/v4/projects/42/invitations"),
    ("gitlab", "sharing", "POST", "/api/v4/projects/acme%2Fapp/share"),
    ("gitlab", "access request", "PUT", "/api/v4/groups/7/access_requests/5/approve"),
    ("gitlab", "ci definition", "POST", "/api/v4/projects/42/repository/files/.gitlab-ci.yml"),
    (
        "gitlab",
        "ci definition, encoded",
        "PUT",
        "/api/v4/projects/acme%2Fapp/repository/files/%2Egitlab-ci%2Eyml",
    ),
    ("gitlab", "ci include", "PUT", "/api/v4/projects/42/repository/files/.gitlab%2Fci%2Fd.yml"),
    ("gitlab", "commit with actions", "POST", "/api/v4/projects/acme%2Fapp/repository/commits"),
    ("gitlab", "token, by path", "POST", "/api/v4/projects/acme%2Fapp/access_tokens"),
    ("bitbucket", "project permission", "PUT", "/2.0/workspaces/w/projects/P/permissions-config"),
    ("bitbucket", "pipeline definition", "POST", "/2.0/repositories/acme/app/src"),
    ("atlassian", "user", "POST", "/ex/jira/c1/rest/api/3/user"),
    ("atlassian", "permission scheme", "POST", "/ex/jira/c/rest/api/3/permissionscheme/1"),
    ("atlassian", "page access", "PUT", "/ex/confluence/c/wiki/rest/api/content/9/restriction"),
    ("jira", "user", "POST", "/rest/api/3/user"),
    ("jira", "permission scheme", "PUT", "/rest/api/2/permissionscheme/10000"),
    ("confluence", "page restriction", "POST", "/wiki/rest/api/content/9/restriction/byOperation"),
    ("slack", "channel invitation", "POST", "/api/conversations.invite"),
    ("slack", "shared channel", "POST", "/api/conversations.inviteShared"),
    ("slack", "workspace membership", "POST", "/api/admin.users.assign"),
    ("google", "bucket policy", "PUT", "/storage/v1/b/acme/iam"),
    ("google", "object acl, encoded name", "POST", "/storage/v1/b/acme/o/r%2F2026.csv/acl"),
    ("google", "administrator", "POST", "/admin/directory/v1/customer/my_customer/roleassignments"),
    ("google", "group membership", "POST", "/admin/directory/v1/groups/eng/members"),
    ("microsoft", "guest", "POST", "/v1.0/invitations"),
    ("microsoft", "group membership", "POST", "/v1.0/groups/g1/members/$ref"),
    ("microsoft", "sharing", "POST", "/v1.0/me/drive/items/i1/invite"),
    ("microsoft", "sharing by path", "POST", "/v1.0/me/drive/root:/Reports/q3.xlsx:/invite"),
    ("microsoft", "sharing link", "POST", "/v1.0/drives/d1/items/i1/createLink"),
    ("microsoft", "team membership", "POST", "/v1.0/teams/t1/channels/c1/members"),
    ("microsoft", "site permission", "POST", "/v1.0/sites/s1/permissions"),
    ("dropbox", "sharing", "POST", "/2/sharing/share_folder"),
    ("dropbox", "member role", "POST", "/2/sharing/update_folder_member"),
    ("dropbox", "team membership", "POST", "/2/team/members/add_v2"),
    ("box", "collaboration", "POST", "/2.0/collaborations"),
    ("box", "group membership", "POST", "/2.0/group_memberships"),
    ("box", "invitation", "POST", "/2.0/invites"),
    ("asana", "workspace membership", "POST", "/api/1.0/workspaces/1/addUser"),
    ("asana", "project membership", "POST", "/api/1.0/projects/2/addMembers"),
    ("asana", "membership", "POST", "/api/1.0/memberships"),
    ("airtable", "workspace collaborator", "POST", "/v0/meta/workspaces/wsp1/collaborators"),
    ("airtable", "share link", "POST", "/v0/meta/bases/app1/shares/shr1"),
    ("miro", "board member role", "PATCH", "/v2/boards/b1/members/m1"),
    ("miro", "team membership", "POST", "/v2/orgs/o1/teams/t1/members"),
    ("clickup", "guest", "POST", "/api/v2/team/1/guest"),
    ("clickup", "guest on a task", "POST", "/api/v2/task/abc/guest/5"),
    ("vercel", "project membership", "POST", "/v1/projects/app/members"),
    ("vercel", "access group", "PATCH", "/v1/access-groups/ag1"),
    ("heroku", "team app collaborator", "POST", "/teams/apps/app/collaborators"),
    ("heroku", "team invitation", "PUT", "/teams/acme/invitations"),
    ("heroku", "team member", "POST", "/teams/acme/members"),
    ("heroku", "app transfer", "POST", "/account/app-transfers"),
    ("sentry", "team on a project", "POST", "/api/0/projects/acme/app/teams/core/"),
    ("pagerduty", "team membership", "PUT", "/teams/T1/users/U1"),
    ("postman", "workspace role", "PATCH", "/workspaces/w1/roles"),
    ("circleci", "context restriction", "DELETE", "/api/v2/context/c1/restrictions/r1"),
    ("circleci", "context restriction", "POST", "/api/v3/context-restrictions"),
    ("cloudflare", "access policy", "POST", "/client/v4/accounts/a1/access/apps/p1/policies"),
    ("cloudflare", "access group", "PUT", "/client/v4/zones/z1/access/groups/g1"),
    ("datadog", "invitation", "POST", "/api/v2/user_invitations"),
    ("datadog", "role", "POST", "/api/v2/roles/r1/users"),
    ("doppler", "project membership", "POST", "/v3/projects/project/members"),
    ("doppler", "secrets synced out", "POST", "/v3/configs/config/syncs"),
    ("zoom", "group membership", "POST", "/v2/groups/g1/members"),
    ("zendesk", "user role", "PUT", "/api/v2/users/5.json"),
    ("zendesk", "group membership", "POST", "/api/v2/group_memberships.json"),
    ("salesforce", "sharing record", "POST", "/services/data/v61.0/sobjects/AccountShare"),
    ("salesforce", "composite", "POST", "/services/data/v61.0/composite/sobjects"),
    ("salesforce", "user", "PATCH", "/services/data/v61.0/sobjects/User/005xx"),
    ("contentful", "team space membership", "POST", "/spaces/s1/team_space_memberships"),
    ("contentful", "organization role", "PUT", "/organizations/o1/organization_memberships/m1"),
    ("typeform", "workspace members", "PATCH", "/workspaces/w1"),
    ("neon", "project sharing", "POST", "/api/v2/projects/p1/permissions"),
    ("neon", "organization invitation", "POST", "/api/v2/organizations/o1/invitations"),
    ("webflow", "site member invitation", "POST", "/v2/sites/s1/users/invite"),
    # `exact` entries: the resource's own write, not what lies below it.
    ("github", "visibility", "PATCH", "/repos/acme/app"),
    ("github", "visibility, by repository id", "PATCH", "/repositories/1296269"),
    ("github", "base permission", "PATCH", "/orgs/acme"),
    ("gitlab", "visibility, ci_config_path", "PUT", "/api/v4/projects/acme%2Fapp"),
    ("gitlab", "group visibility", "PUT", "/api/v4/groups/7"),
    ("bitbucket", "visibility", "PUT", "/2.0/repositories/acme/app"),
    ("box", "shared link", "PUT", "/2.0/files/123"),
    ("miro", "sharing policy", "PATCH", "/v2/boards/b1"),
    ("zoom", "user with a password", "POST", "/v2/users"),
    ("microsoft", "user with a password", "POST", "/v1.0/users"),
    ("microsoft", "password reset", "PATCH", "/v1.0/users/u1"),
    ("vercel", "build command", "PATCH", "/v9/projects/app"),
    ("netlify", "build command", "PATCH", "/api/v1/sites/s1"),
    ("render", "build command", "PATCH", "/v1/services/srv-1"),
    ("brevo", "user invitation", "POST", "/v3/organization/user/invitation/send"),
    ("huggingface", "repository made public", "PUT", "/api/models/acme/secret-model/settings"),
    ("huggingface", "repository moved", "POST", "/api/repos/move"),
    ("webflow", "workspace member", "POST", "/v2/workspaces/w1/members"),
    ("contentful", "organization invitation", "POST", "/organizations/o1/invitations"),
    ("contentful", "team membership", "POST", "/organizations/o1/teams/t1/team_memberships"),
]  # fmt: skip


def _store_any(api, provider_id: str) -> None:
    shape = catalog()[provider_id].shapes[0]
    values = {
        name: "bot@example.com" if name == "email" else marked(name)
        for name in sorted(shape.required)
    }
    assert api.store(provider_id, creds(**values)).status_code == 201, provider_id


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("provider_id", "widens", "method", "raw"),
    WIDENING,
    ids=[f"{p}-{w}-{m}" for p, w, m, _ in WIDENING],
)
def test_a_call_that_widens_access_needs_a_grant_that_names_it(
    alice_api, provider_server, provider_id, widens, method, raw
):
    _store_any(alice_api, provider_id)
    assert put_agent(alice_api, "bot", [provider_id], access=None).status_code == 201
    token = agent_token(alice_api, "bot")
    refused_call = call(token, method, provider_id, unquote(raw), raw=f"{PROXY}/{provider_id}{raw}")
    problem = assert_problem(refused_call, 403, "sensitive_endpoint")
    assert "must name its path explicitly" in problem["detail"]
    assert provider_server.requests == []

    named = [{"service": provider_id, "paths": [raw]}]
    assert put_agent(alice_api, "bot", named, access=None).status_code == 200
    allowed = call(token, method, provider_id, unquote(raw), raw=f"{PROXY}/{provider_id}{raw}")
    assert allowed.status_code == 200, allowed.content
    [sent] = provider_server.requests
    assert (sent.method, sent.path) == (method, checked_path(raw).encoded)
