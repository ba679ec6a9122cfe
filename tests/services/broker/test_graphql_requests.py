"""GraphQL by operation: which mutations a request selects (the reference parser's reading:
aliases, fragments, batches, operation names, comments), the catalog's GraphQL blocks, the
grant's `graphql` field, and the broker's rule on each GraphQL provider (Linear, GitHub,
Shopify, monday) against a provider stand-in on 127.0.0.1, through the proxy and through MCP's
call_api. The real clients (gql, githubkit) are in tests/sdks/test_graphql_operations.py."""

from __future__ import annotations

import contextlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.catalog import CatalogError, catalog, parse_catalog
from providers.graphql_operations import (
    MAX_GRAPHQL_TOKENS,
    InvalidGraphQLRequest,
    selected_mutations,
)
from services.models import AuditEvent, Grant
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent

JSON = "application/json"
KEY = 'mutation { apiKeyCreate(input: {label: "agent"}) { success apiKey { id } } }'
VIEWER = "{ viewer { id name } }"


def selected(document: object, *, content_type: str = JSON, query: str = "") -> frozenset[str]:
    """The mutations a request with this JSON body (a request object, a batch, or raw bytes)
    selects."""
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return selected_mutations(body=body, content_type=content_type, query=query)


def refused_as_invalid(document: object, **options: str) -> str:
    with pytest.raises(InvalidGraphQLRequest) as raised:
        selected(document, **options)
    return str(raised.value)


# --- what a request selects --------------------------------------------------------------------


class TestSelectedMutations:
    def test_a_query_selects_no_mutation(self):
        assert selected({"query": VIEWER}) == frozenset()
        assert selected({"query": "query Me { viewer { id } }", "operationName": "Me"}) == set()

    def test_a_mutation_selects_its_top_level_fields_only(self):
        document = (
            'mutation { issueCreate(input: {title: "t"}) { issue { id } } '
            'apiKeyCreate(input: {label: "x"}) { apiKey { id } } }'
        )
        assert selected({"query": document}) == {"issueCreate", "apiKeyCreate"}

    def test_an_alias_hides_nothing(self):
        assert selected({"query": "mutation { harmless: apiKeyCreate { success } }"}) == {
            "apiKeyCreate"
        }

    def test_a_name_inside_a_string_or_an_argument_is_no_field(self):
        document = (
            'mutation { issueCreate(input: {title: "apiKeyCreate", apiKeyCreate: 1}) { success } }'
        )
        assert selected({"query": document}) == {"issueCreate"}

    def test_a_query_field_with_a_mutations_name_is_not_a_mutation(self):
        assert selected({"query": "query { apiKeyCreate { id } }"}) == frozenset()

    @pytest.mark.parametrize(
        "document",
        [
            "mutation { ...Key } fragment Key on Mutation { apiKeyCreate { success } }",
            "mutation { ...A } fragment A on Mutation { ...B } "
            "fragment B on Mutation { k: apiKeyCreate { success } }",
            "mutation { ... on Mutation { apiKeyCreate { success } } }",
            "mutation { ... { ... @include(if: false) { apiKeyCreate { success } } } }",
            "mutation { apiKeyCreate @skip(if: true) { success } }",
            # A fragment on another type, spread at the root (a server would refuse it: still
            # counted).
            "mutation { ...F } fragment F on Query { apiKeyCreate { success } }",
            # Two fragments of one name: both read.
            "mutation { ...F } fragment F on Mutation { viewer } "
            "fragment F on Mutation { apiKeyCreate }",
        ],
    )
    def test_fragments_and_directives_hide_nothing(self, document):
        assert "apiKeyCreate" in selected({"query": document})

    def test_a_fragment_that_spreads_itself_ends(self):
        document = "mutation { ...A } fragment A on Mutation { ...A apiKeyCreate { success } }"
        assert selected({"query": document}) == {"apiKeyCreate"}

    @pytest.mark.parametrize(
        "document",
        [
            "mutation{apiKeyCreate{success}}",
            "# a comment: query { viewer }\nmutation\n{\n#apiKey\napiKeyCreate{success}}",
            "\ufeffmutation ,,, { ,,apiKeyCreate , { success } }",
            'mutation\t\r\n{\u0020apiKeyCreate\n(input:{label:"""block\nstring"""}){success}}',
        ],
    )
    def test_comments_commas_and_odd_whitespace_hide_nothing(self, document):
        assert selected({"query": document}) == {"apiKeyCreate"}

    def test_json_escapes_are_read_as_the_provider_reads_them(self):
        body = b'{"query": "mutation { \\u0061piKeyCreate { success } }"}'
        assert selected(body) == {"apiKeyCreate"}

    def test_operation_name_chooses_the_operation_that_runs(self):
        document = f"query Me {VIEWER} mutation Key {{ apiKeyCreate {{ success }} }}"
        assert selected({"query": document, "operationName": "Me"}) == frozenset()
        assert selected({"query": document, "operationName": "Key"}) == {"apiKeyCreate"}

    @pytest.mark.parametrize("name", [None, ""])
    def test_without_an_operation_name_every_operation_counts(self, name):
        document = f"query Me {VIEWER} mutation Key {{ apiKeyCreate {{ success }} }}"
        assert selected({"query": document, "operationName": name}) == {"apiKeyCreate"}

    def test_two_operations_of_one_name_both_count(self):
        document = "query A { viewer { id } } mutation A { apiKeyCreate { success } }"
        assert selected({"query": document, "operationName": "A"}) == {"apiKeyCreate"}

    def test_a_batch_counts_every_request(self):
        batch = [{"query": VIEWER}, {"query": "mutation { webhookCreate { success } }"}]
        assert selected(batch) == {"webhookCreate"}
        assert selected([{"query": VIEWER}, {"query": VIEWER}]) == frozenset()

    def test_the_query_string_is_read_whatever_the_method(self):
        query = "query=mutation%20%7B%20apiKeyCreate%20%7B%20success%20%7D%20%7D"
        assert selected_mutations(body=b"", content_type="", query=query) == {"apiKeyCreate"}
        benign = json.dumps({"query": VIEWER}).encode()
        assert selected_mutations(body=benign, content_type=JSON, query=query) == {"apiKeyCreate"}
        assert selected_mutations(body=b"", content_type="", query="first=1") == frozenset()

    def test_the_query_string_is_read_split_at_semicolons_too(self):
        # Rack 2 (Rails) splits a query string at `;` as well as `&`.
        query = "first=1;query=mutation%7BapiKeyCreate%7Bsuccess%7D%7D"
        assert selected_mutations(body=b"", content_type="", query=query) == {"apiKeyCreate"}

    def test_an_operation_name_in_the_url_makes_every_body_operation_count(self):
        # Some servers let the URL's operationName win over the body's.
        document = f"query Me {VIEWER} mutation Key {{ apiKeyCreate {{ success }} }}"
        body = json.dumps({"query": document, "operationName": "Me"}).encode()
        chosen = selected_mutations(body=body, content_type=JSON, query="operationName=Key")
        assert chosen == {"apiKeyCreate"}
        assert selected_mutations(body=body, content_type=JSON, query="") == frozenset()

    def test_utf8_is_named_either_way(self):
        for charset in ("utf-8", "UTF-8", '"utf-8"', "utf8"):
            content_type = f"application/json; charset={charset}"
            assert selected({"query": KEY}, content_type=content_type) == {"apiKeyCreate"}

    def test_an_application_graphql_body_is_the_document(self):
        assert selected(KEY.encode(), content_type="application/graphql") == {"apiKeyCreate"}

    def test_a_subscription_selects_no_mutation(self):
        assert selected({"query": "subscription { apiKeyCreate }"}) == frozenset()


class TestUnreadableRequests:
    @pytest.mark.parametrize(
        ("body", "content_type", "words"),
        [
            (b"not json", JSON, "not JSON"),
            (
                b'{"query": "{ viewer { id } }", "query": "mutation { apiKeyCreate }"}',
                JSON,
                "twice",
            ),
            (b"[]", JSON, "from 1 to 100 requests"),
            (json.dumps([{"query": "{ a }"}] * 101).encode(), JSON, "from 1 to 100 requests"),
            (b'["{ viewer { id } }"]', JSON, "not a JSON object"),
            (b'{"variables": {}}', JSON, "no `query`"),
            (b'{"query": "  "}', JSON, "no `query`"),
            (b'{"query": 1}', JSON, "no `query`"),
            (
                b'{"query": "{ viewer { id } }", '
                b'"extensions": {"persistedQuery": {"sha256Hash": "ab"}}}',
                JSON,
                "persisted query",
            ),
            (b'{"extensions": {"persistedQuery": {"sha256Hash": "ab"}}}', JSON, "no `query`"),
            (b'{"query": "{ viewer }", "documentId": "x"}', JSON, "other than query"),
            (b'{"query": "{ viewer }", "operationName": 1}', JSON, "`operationName`"),
            (b'{"query": "{ viewer }", "variables": []}', JSON, "`variables`"),
            (b'{"query": "mutation { apiKeyCreate "}', JSON, "does not parse"),
            (b'{"query": "fragment F on Mutation { apiKeyCreate }"}', JSON, "no operation"),
            (b'{"query": "query A { viewer }", "operationName": "B"}', JSON, "names no operation"),
            (b'{"query": "{ viewer }"}', "application/x-www-form-urlencoded", "application/json"),
            (b'{"query": "{ viewer }"}', "text/plain", "application/json"),
            (b'{"query": "{ viewer }"}', "", "application/json"),
            (b'{"query": "{ viewer }"}', "multipart/form-data; boundary=x", "application/json"),
            (b'{"query": "{ viewer }"}', "application/json; charset=latin-1", "UTF-8"),
            (b'{"query": "\xff"}', JSON, "not UTF-8"),
            (b"[" * 100_000 + b"]" * 100_000, JSON, "not JSON"),
        ],
    )
    def test_is_refused_saying_why(self, body, content_type, words):
        assert words in refused_as_invalid(body, content_type=content_type)

    def test_a_query_parameter_twice_is_refused(self):
        with pytest.raises(InvalidGraphQLRequest, match="twice"):
            selected_mutations(body=b"", content_type="", query="query=%7Bviewer%7D&query=x")

    def test_a_document_nested_too_deeply_is_refused(self):
        document = "{ a " * 500 + "}" * 500
        assert "nested too deeply" in refused_as_invalid({"query": document})

    def test_the_refusal_quotes_nothing_of_the_request(self):
        secret = marked("in-document")
        message = refused_as_invalid({"query": f"mutation {{ {secret.replace('-', '_')} "})
        assert secret.replace("-", "_") not in message


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
GRAPHQL_TEXT = st.text(
    alphabet='{}()[]:$@!.,#"\n mutation query fragment on apiKeyCreate ...', max_size=120
)


@pytest.mark.slow
class TestAnyInput:
    """Whatever the body, query string or media type, the reading answers a set of names or
    InvalidGraphQLRequest: never another exception (which would be a 500)."""

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=300), st.sampled_from([JSON, "application/graphql", "text/plain"]))
    def test_any_body(self, body, content_type):
        with contextlib.suppress(InvalidGraphQLRequest):
            selected_mutations(body=body, content_type=content_type, query="")

    @settings(max_examples=300, deadline=None)
    @given(JSON_VALUES, GRAPHQL_TEXT, st.text(max_size=60))
    def test_any_request_object(self, extra, document, query):
        for request in ({"query": document}, {"query": document, "variables": extra}, extra):
            with contextlib.suppress(InvalidGraphQLRequest):
                selected(request, query=query)


class TestParsingCost:
    """A document's cost is bounded by its tokens, not by the body's size: every document of a
    request together holds at most MAX_GRAPHQL_TOKENS tokens, comments included."""

    def test_a_document_over_the_token_limit_is_refused(self):
        document = "{ " + "a " * MAX_GRAPHQL_TOKENS + "}"
        assert "tokens" in refused_as_invalid({"query": document})

    def test_a_document_just_under_it_is_read(self):
        document = "{ " + "a " * (MAX_GRAPHQL_TOKENS - 10) + "}"
        assert selected({"query": document}) == frozenset()

    def test_comments_count_as_tokens(self):
        document = "#\n" * MAX_GRAPHQL_TOKENS + "mutation { apiKeyCreate }"
        assert "tokens" in refused_as_invalid({"query": document})

    def test_the_limit_holds_across_a_batch(self):
        half = {"query": "{ " + "a " * (MAX_GRAPHQL_TOKENS // 2) + "}"}
        assert selected([half]) == frozenset()
        assert "tokens" in refused_as_invalid([half, half, half])
        # Many small documents too.
        many = {"query": "{ " + "a " * (MAX_GRAPHQL_TOKENS // 90) + "}"}
        assert selected([many] * 80) == frozenset()
        assert "tokens" in refused_as_invalid([many] * 100)


# --- the catalog -------------------------------------------------------------------------------


class TestCatalog:
    @pytest.mark.parametrize(
        ("provider_id", "path", "mutation"),
        [
            ("linear", "/graphql", "apiKeyCreate"),
            ("linear", "/graphql", "webhookCreate"),
            ("linear", "/graphql", "organizationInviteCreate"),
            ("linear", "/graphql", "userChangeRole"),
            ("linear", "/graphql", "oauthClientCreate"),
            ("github", "/graphql", "createCommitOnBranch"),
            ("github", "/graphql", "updateTeamsRepository"),
            ("shopify", "/admin/api/2026-10/graphql.json", "storefrontAccessTokenCreate"),
            ("shopify", "/admin/api/2026-10/graphql.json", "bulkOperationRunMutation"),
            ("shopify", "/admin/api/graphql.json", "webhookSubscriptionCreate"),
            ("monday", "/v2", "create_webhook"),
            ("monday", "/v2", "add_users_to_workspace"),
            ("monday", "/v2", "invite_users"),
        ],
    )
    def test_the_graphql_providers_list_their_sensitive_mutations(
        self, provider_id, path, mutation
    ):
        endpoint = catalog()[provider_id].graphql
        assert endpoint is not None
        assert endpoint.serves(path)
        assert endpoint.refused({mutation}, named=()) is not None
        assert endpoint.refused({mutation}, named=(mutation,)) is None

    @pytest.mark.parametrize("provider_id", ["linear", "github", "shopify", "monday"])
    def test_every_listed_mutation_has_its_docs_page_and_why(self, provider_id):
        endpoint = catalog()[provider_id].graphql
        for entry in endpoint.sensitive:
            assert entry.docs.startswith("https://"), entry.mutation
            assert entry.why.strip(), entry.mutation

    @pytest.mark.parametrize(
        ("provider_id", "method", "path"),
        [
            ("linear", "POST", "/graphql"),
            ("monday", "POST", "/v2"),
            ("shopify", "POST", "/admin/api/2026-10/graphql.json"),
            ("github", "POST", "/graphql"),
        ],
    )
    def test_no_graphql_endpoint_is_sensitive_as_a_whole(self, provider_id, method, path):
        assert not any(e.matches(method, path) for e in catalog()[provider_id].sensitive)

    ENTRY = """
[[providers]]
id = "example"
name = "Example"
category = "developer"
base_url = "https://api.example.com"
sensitive_none = "The API has no such endpoint (https://docs.example.com/api)."
[[providers.shapes]]
key_type = "api_key"
required = ["api_key"]
[providers.graphql]
{block}
"""
    BLOCK = """paths = ["/graphql"]
docs = "https://docs.example.com/graphql"
[[providers.graphql.sensitive]]
mutation = "tokenCreate"
why = "mints a token"
docs = "https://docs.example.com/tokenCreate"
"""

    def test_a_block_parses(self):
        endpoint = parse_catalog(self.ENTRY.format(block=self.BLOCK))["example"].graphql
        assert (endpoint.paths, endpoint.mutations) == (("/graphql",), {"tokenCreate"})

    @pytest.mark.parametrize(
        ("block", "words"),
        [
            (BLOCK + 'note = "x"\n', "unknown key `note`"),
            ('note = "x"\n' + BLOCK, "unknown key `note`"),
            (BLOCK.replace('paths = ["/graphql"]', 'paths = "/graphql"'), "`paths`"),
            (BLOCK.replace('paths = ["/graphql"]', 'paths = ["graphql"]'), "`paths`"),
            (BLOCK.replace('paths = ["/graphql"]', "paths = []"), "`paths`"),
            (BLOCK.replace("https://docs.example.com/graphql", "http://x"), "`docs`"),
            (BLOCK.replace('"tokenCreate"', '"token-create"'), "`mutation` must be a GraphQL name"),
            (BLOCK.replace('why = "mints a token"\n', ""), "`why` is required"),
            (BLOCK.replace("https://docs.example.com/tokenCreate", "ftp://x"), "`docs`"),
            (BLOCK + BLOCK.split("\n", 2)[2], "appears twice"),
            (BLOCK.split("[[")[0], "`sensitive` must list"),
        ],
    )
    def test_an_invalid_block_is_refused_at_load_naming_the_field(self, block, words):
        with pytest.raises(CatalogError) as raised:
            parse_catalog(self.ENTRY.format(block=block))
        assert "provider 'example'" in str(raised.value)
        assert words in str(raised.value)


# --- grants ------------------------------------------------------------------------------------


@pytest.mark.django_db
class TestGrants:
    def test_a_grant_names_mutations_and_shows_them(self, alice_api):
        services = [{"service": "linear", "graphql": ["webhookCreate", "apiKeyCreate"]}]
        response = put_agent(alice_api, "bot", services, access=None)
        assert response.status_code == 201, response.content
        [shown] = response.json()["services"]
        assert shown["graphql"] == ["apiKeyCreate", "webhookCreate"]
        assert Grant.objects.get().graphql == ["apiKeyCreate", "webhookCreate"]
        listed = alice_api.client.get("/api/v1/agents", headers=alice_api.headers()).json()
        assert listed[0]["services"][0]["graphql"] == ["apiKeyCreate", "webhookCreate"]

    def test_a_default_grant_names_none(self, alice_api):
        response = put_agent(alice_api, "bot", ["linear"], access=None)
        assert response.json()["services"][0]["graphql"] == []
        assert Grant.objects.get().graphql == []

    @pytest.mark.parametrize(
        ("service", "graphql", "field"),
        [
            ("linear", ["api-key-create"], "services[0].graphql[0]"),
            ("linear", ["apiKeyCreate", "createCommitOnBranch"], "services[0].graphql[1]"),
            ("linear", ["apikeycreate"], "services[0].graphql[0]"),
            ("openai", ["apiKeyCreate"], "services[0].graphql[0]"),
            ("linear", "apiKeyCreate", "services[0].graphql"),
            ("linear", [1], "services[0].graphql[0]"),
            ("linear", ["apiKeyCreate"] * 51, "services[0].graphql"),
        ],
    )
    def test_a_bad_graphql_list_is_400_naming_the_field(self, alice_api, service, graphql, field):
        response = put_agent(alice_api, "bot", [{"service": service, "graphql": graphql}])
        problem = assert_problem(response, 400, "invalid_request")
        assert field in {error["field"] for error in problem["errors"]}, problem["errors"]
        assert not Grant.objects.exists()

    def test_the_openapi_document_states_the_field_and_the_code(self):
        document = Client().get("/api/v1/schema?format=json").json()
        schemas = document["components"]["schemas"]
        grant_input = schemas["GrantInput"]["properties"]["graphql"]
        assert grant_input["maxItems"] == 50
        assert grant_input["items"]["pattern"] == "^[_A-Za-z][_0-9A-Za-z]*$"
        assert "graphql" in schemas["Grant"]["required"]
        assert "invalid_graphql" in json.dumps(document)

    def test_create_agent_takes_graphql(self, alice):
        out = StringIO()
        call_command(
            "create_agent", alice.name, "bot", "--service", "linear", "--graphql", "apiKeyCreate",
            stdout=out,
        )  # fmt: skip
        assert Grant.objects.get().graphql == ["apiKeyCreate"]
        assert "GraphQL apiKeyCreate" in out.getvalue()
        with pytest.raises(CommandError, match="--graphql for linear"):
            call_command(
                "create_agent", alice.name, "bot2", "--service", "linear", "--graphql", "nope"
            )


# --- the broker's rule -------------------------------------------------------------------------


def graphql_call(token: str, service: str, path: str, document: object, **options):
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return call(token, options.pop("method", "POST"), service, path, body=body, **options)


@pytest.fixture
def linear(alice_api, provider_server):
    """Alice's Linear key and her agent `bot` with a default grant; its token."""
    assert alice_api.store("linear", creds(api_key=marked("lin"))).status_code == 201
    assert put_agent(alice_api, "bot", ["linear"], access=None).status_code == 201
    return agent_token(alice_api, "bot")


@pytest.mark.django_db
class TestTheRule:
    def test_a_query_passes_a_default_grant_unchanged(self, linear, provider_server):
        body = json.dumps({"query": VIEWER, "variables": {"a": 1}}).encode()
        response = graphql_call(linear, "linear", "/graphql", body)
        assert response.status_code == 200
        [sent] = provider_server.requests
        assert (sent.method, sent.path, sent.body) == ("POST", "/graphql", body)

    def test_an_ordinary_mutation_passes(self, linear, provider_server):
        document = {"query": 'mutation { issueCreate(input: {title: "t"}) { success } }'}
        assert graphql_call(linear, "linear", "/graphql", document).status_code == 200
        assert len(provider_server.requests) == 1

    def test_a_listed_mutation_is_refused_naming_it(self, linear, provider_server):
        response = graphql_call(linear, "linear", "/graphql", {"query": KEY})
        problem = assert_problem(response, 403, "sensitive_endpoint")
        assert "apiKeyCreate" in problem["detail"]
        assert '"graphql": ["apiKeyCreate"]' in problem["detail"]
        assert response["X-Credvault-Error"] == "sensitive_endpoint"
        assert provider_server.requests == []
        event = AuditEvent.objects.filter(action="agent.proxy").get()
        assert (event.status, event.method, event.path) == (403, "POST", "/graphql")

    @pytest.mark.parametrize("path", ["/GraphQL", "/graphql/", "/graphql;v=1", "/graphql/x"])
    def test_every_spelling_of_the_endpoint_is_read(self, linear, provider_server, path):
        assert_problem(
            graphql_call(linear, "linear", path, {"query": KEY}), 403, "sensitive_endpoint"
        )
        assert provider_server.requests == []

    def test_a_batch_with_one_listed_mutation_is_refused_whole(self, linear, provider_server):
        batch = [{"query": VIEWER}, {"query": KEY}]
        assert_problem(graphql_call(linear, "linear", "/graphql", batch), 403, "sensitive_endpoint")
        assert provider_server.requests == []

    def test_a_grant_that_names_the_mutation_reaches_it(self, alice_api, linear, provider_server):
        grant = {"service": "linear", "graphql": ["apiKeyCreate"]}
        assert put_agent(alice_api, "bot", [grant]).status_code == 200
        assert graphql_call(linear, "linear", "/graphql", {"query": KEY}).status_code == 200
        # Another listed mutation stays refused.
        hook = {"query": "mutation { webhookCreate(input: {}) { success } }"}
        problem = assert_problem(
            graphql_call(linear, "linear", "/graphql", hook), 403, "sensitive_endpoint"
        )
        assert "webhookCreate" in problem["detail"]
        assert len(provider_server.requests) == 1

    def test_a_grant_that_names_the_path_no_longer_allows_every_mutation(
        self, alice_api, linear, provider_server
    ):
        grant = {"service": "linear", "paths": ["/graphql"]}
        assert put_agent(alice_api, "bot", [grant]).status_code == 200
        assert graphql_call(linear, "linear", "/graphql", {"query": VIEWER}).status_code == 200
        assert_problem(
            graphql_call(linear, "linear", "/graphql", {"query": KEY}), 403, "sensitive_endpoint"
        )
        assert len(provider_server.requests) == 1

    def test_an_unreadable_request_is_400_and_nothing_is_sent(self, linear, provider_server):
        response = graphql_call(linear, "linear", "/graphql", b'{"query": "mutation {"}')
        problem = assert_problem(response, 400, "invalid_graphql")
        assert "does not parse" in problem["detail"]
        assert response["X-Credvault-Error"] == "invalid_graphql"
        response = graphql_call(
            linear, "linear", "/graphql", b"query={viewer{id}}",
            content_type="application/x-www-form-urlencoded",
        )  # fmt: skip
        assert_problem(response, 400, "invalid_graphql")
        assert provider_server.requests == []

    def test_a_grant_outside_the_path_is_refused_before_the_body_is_read(
        self, alice_api, linear, provider_server
    ):
        grant = {"service": "linear", "paths": ["/other"]}
        assert put_agent(alice_api, "bot", [grant]).status_code == 200
        assert_problem(graphql_call(linear, "linear", "/graphql", b"not json"), 403, "not_granted")

    def test_other_paths_are_not_read_as_graphql(self, linear, provider_server):
        response = graphql_call(
            linear, "linear", "/upload", b"raw bytes", content_type="text/plain"
        )
        assert response.status_code == 200
        assert provider_server.requests[0].body == b"raw bytes"

    def test_github_reads_its_graphql_and_leaves_rest_alone(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        commit = {
            "query": "mutation($i: CreateCommitOnBranchInput!) { "
            "createCommitOnBranch(input: $i) { commit { oid } } }"
        }
        assert_problem(graphql_call(token, "github", "/graphql", commit), 403, "sensitive_endpoint")
        star = {"query": 'mutation { addStar(input: {starrableId: "x"}) { clientMutationId } }'}
        assert graphql_call(token, "github", "/graphql", star).status_code == 200
        issue = graphql_call(
            token, "github", "/repos/o/r/issues", b"title", content_type="text/plain"
        )
        assert issue.status_code == 200
        assert [sent.path for sent in provider_server.requests] == ["/graphql", "/repos/o/r/issues"]

    def test_a_get_with_a_query_parameter_is_read(self, alice_api, provider_server):
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        mutation = "query=mutation%7BupdateTeamsRepository(input%3A%7B%7D)%7BclientMutationId%7D%7D"
        response = call(token, "GET", "github", "/graphql", query=mutation)
        problem = assert_problem(response, 403, "sensitive_endpoint")
        assert "updateTeamsRepository" in problem["detail"]
        assert (
            call(
                token, "GET", "github", "/graphql", query="query=%7Bviewer%7Blogin%7D%7D"
            ).status_code
            == 200
        )
        assert [sent.path for sent in provider_server.requests] == [
            "/graphql?query=%7Bviewer%7Blogin%7D%7D"
        ]

    def test_shopify_reads_every_version_of_its_endpoint(self, alice_api, provider_server):
        assert alice_api.store("shopify", creds(access_token=marked("shp"))).status_code == 201
        assert put_agent(alice_api, "bot", ["shopify"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        minting = {
            "query": 'mutation { storefrontAccessTokenCreate(input: {title: "t"}) { '
            "storefrontAccessToken { accessToken } } }"
        }
        for path in (
            "/admin/api/2026-10/graphql.json",
            "/admin/api/2026-10/graphql",
            "/admin/api/graphql.json",
        ):
            assert_problem(graphql_call(token, "shopify", path, minting), 403, "sensitive_endpoint")
        products = {"query": "{ products(first: 1) { nodes { id } } }"}
        assert (
            graphql_call(token, "shopify", "/admin/api/2026-10/graphql.json", products).status_code
            == 200
        )
        assert len(provider_server.requests) == 1

    def test_monday_reads_v2_and_refuses_uploads_it_cannot_read(self, alice_api, provider_server):
        assert alice_api.store("monday", creds(api_key=marked("mon"))).status_code == 201
        assert put_agent(alice_api, "bot", ["monday"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        hook = {
            "query": 'mutation { create_webhook(board_id: 1, url: "https://x", '
            "event: create_item) { id } }"
        }
        assert_problem(graphql_call(token, "monday", "/v2", hook), 403, "sensitive_endpoint")
        assert graphql_call(token, "monday", "/v2", {"query": "{ me { id } }"}).status_code == 200
        upload = (
            b'--b\r\nContent-Disposition: form-data; name="query"\r\n\r\n'
            b"mutation { create_webhook }\r\n--b--\r\n"
        )
        response = graphql_call(
            token, "monday", "/v2/file", upload, content_type="multipart/form-data; boundary=b"
        )
        assert_problem(response, 400, "invalid_graphql")
        assert len(provider_server.requests) == 1


@pytest.mark.django_db
def test_mcp_call_api_gets_the_same_rule(linear, provider_server):
    """MCP's call_api is the broker's own call: a listed mutation is a tool error naming it,
    and nothing reaches the provider."""

    def call_api(body: object) -> dict:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "call_api",
                "arguments": {
                    "service": "linear",
                    "method": "POST",
                    "path": "/graphql",
                    "body": body,
                },
            },
        }
        response = Client(raise_request_exception=False).post(
            "/mcp",
            json.dumps(message),
            content_type=JSON,
            headers={
                "Authorization": f"Bearer {linear}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
        assert response.status_code == 200, response.content
        return response.json()["result"]

    refused = call_api({"query": KEY})
    assert refused["isError"] is True
    error = refused["structuredContent"]["error"]
    assert (error["status"], error["code"]) == (403, "sensitive_endpoint")
    assert "apiKeyCreate" in json.dumps(refused)
    assert provider_server.requests == []
    passed = call_api({"query": VIEWER})
    assert passed["isError"] is False
    assert json.loads(provider_server.requests[0].body) == {"query": VIEWER}
    events = AuditEvent.objects.filter(action="agent.proxy").order_by("seq")
    assert [(e.status, e.via) for e in events] == [(403, "mcp"), (200, "mcp")]
