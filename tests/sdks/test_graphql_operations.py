"""GraphQL by operation, with real clients: gql (its requests transport) against a Linear
stand-in, and githubkit's `github.graphql(...)` against a GitHub GraphQL stand-in, each
configured as an agent's developer configures it (the endpoint at credvault's proxy, the agent
token where the client expects its key), credvault under gunicorn as `make run` serves it.

Under a default grant a query and an ordinary mutation pass; a mutation the catalog lists as
creating or widening a credential (Linear's apiKeyCreate, GitHub's createCommitOnBranch) is
refused with 403, `X-Credvault-Error: sensitive_endpoint`, and never reaches the provider,
whatever the client does to hide it (an alias, a fragment, a batch); once the grant names the
mutation it reaches the provider with the stored credential.
"""

from __future__ import annotations

from collections.abc import Iterator

import githubkit
import pytest
from githubkit.exception import RequestFailed
from gql import Client, GraphQLRequest, gql
from gql.transport.exceptions import TransportServerError
from gql.transport.requests import RequestsHTTPTransport

from tests.support.harness import Gunicorn
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    marked,
    put_agent,
    served_env,
)
from tests.support.sdk_stand_ins import GitHubGraphQLStandIn, GraphQLStandIn, LinearStandIn, carries

REDACTED = "[REDACTED]"
CREDENTIALS = {"linear": marked("linear"), "github": marked("github")}
STAND_INS = {"linear": LinearStandIn, "github": GitHubGraphQLStandIn}

VIEWER = gql("query Viewer { viewer { id name } }")
ISSUE = gql('mutation { issueCreate(input: {title: "Fix it"}) { success issue { title } } }')
API_KEY = gql('mutation { apiKeyCreate(input: {label: "agent"}) { success apiKey { label } } }')

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, GraphQLStandIn]]:
    servers = {service: kind(CREDENTIALS[service]).start() for service, kind in STAND_INS.items()}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, providers) -> Iterator[Gunicorn]:
    env = served_env({name: p.url for name, p in providers.items()})
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def alice_bot(alice_api, providers, credvault):
    """Alice's Linear and GitHub sets stored, her agent `bot` with default grants of both; a
    function that replaces its grants; the stand-ins' records empty."""
    for service, value in CREDENTIALS.items():
        assert alice_api.store(service, creds(api_key=value)).status_code == 201

    def grant(*services: object) -> None:
        response = put_agent(alice_api, "bot", list(services), access=None)
        assert response.status_code in (200, 201), response.content

    grant("linear", "github")
    for provider in providers.values():
        provider.reset()
    return grant


@pytest.fixture
def token(alice_api, alice_bot) -> str:
    return agent_token(alice_api, "bot")


def linear_client(credvault: Gunicorn, token: str) -> tuple[Client, RequestsHTTPTransport]:
    """gql as a Linear developer configures it: the endpoint, and the key as Linear takes a
    personal API key, `Authorization: <key>`."""
    transport = RequestsHTTPTransport(
        url=f"{credvault.url}{PROXY_PREFIX}/linear/graphql",
        headers={"Authorization": token},
        retries=0,
    )
    return Client(transport=transport), transport


def assert_brokered(provider: GraphQLStandIn, token: str, calls: int) -> None:
    assert len(provider.requests) == calls, [r.body for r in provider.requests]
    for received in provider.requests:
        assert provider.authorized(received.headers)
        assert not carries(received, token)


def assert_refused(raised: pytest.ExceptionInfo, headers: object) -> None:
    assert raised.value.code == 403
    assert headers["X-Credvault-Error"] == "sensitive_endpoint"


# --- gql and Linear ----------------------------------------------------------------------------


def test_gql_queries_and_creates_issues_under_a_default_grant(credvault, token, providers):
    client, _ = linear_client(credvault, token)
    viewer = client.execute(VIEWER)
    issue = client.execute(ISSUE)
    assert viewer == {"viewer": {"id": "2d1f-user", "name": f"Read with {REDACTED}"}}
    assert issue == {"issueCreate": {"success": True, "issue": {"title": "Fix it"}}}
    assert providers["linear"].executed == ["issueCreate"]
    assert_brokered(providers["linear"], token, calls=2)


@pytest.mark.parametrize(
    "document",
    [
        API_KEY,
        gql('mutation Harmless { renamed: apiKeyCreate(input: {label: "a"}) { success } }'),
        gql(
            "mutation { ...Keys } "
            'fragment Keys on Mutation { apiKeyCreate(input: {label: "a"}) { success } }'
        ),
    ],
    ids=["plain", "alias", "fragment"],
)
def test_gql_api_key_create_is_refused_under_a_default_grant(credvault, token, providers, document):
    client, transport = linear_client(credvault, token)
    with pytest.raises(TransportServerError) as raised:
        client.execute(document)
    assert_refused(raised, transport.response_headers)
    assert providers["linear"].requests == []


def test_gql_a_batch_that_hides_api_key_create_is_refused_whole(credvault, token, providers):
    client, transport = linear_client(credvault, token)
    batch = [GraphQLRequest(VIEWER), GraphQLRequest(API_KEY)]
    with pytest.raises(TransportServerError) as raised:
        client.execute_batch(batch)
    assert_refused(raised, transport.response_headers)
    assert providers["linear"].requests == []
    # Without it, the batch passes.
    answers = client.execute_batch([GraphQLRequest(VIEWER), GraphQLRequest(ISSUE)])
    assert [sorted(answer) for answer in answers] == [["viewer"], ["issueCreate"]]
    assert_brokered(providers["linear"], token, calls=1)


def test_gql_api_key_create_reaches_linear_once_the_grant_names_it(
    credvault, token, providers, alice_bot
):
    alice_bot({"service": "linear", "graphql": ["apiKeyCreate"]}, "github")
    client, _ = linear_client(credvault, token)
    created = client.execute(API_KEY)
    assert created == {"apiKeyCreate": {"success": True, "apiKey": {"label": "agent"}}}
    assert providers["linear"].executed == ["apiKeyCreate"]
    assert_brokered(providers["linear"], token, calls=1)


# --- githubkit and GitHub's GraphQL ------------------------------------------------------------

COMMIT = """
mutation($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) { commit { oid } }
}
"""
COMMIT_INPUT = {
    "input": {
        "branch": {"repositoryNameWithOwner": "o/r", "branchName": "main"},
        "expectedHeadOid": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "message": {"headline": "Add a workflow"},
        "fileChanges": {"additions": [{"path": ".github/workflows/x.yml", "contents": "b24="}]},
    }
}


def github_client(credvault: Gunicorn, token: str) -> githubkit.GitHub:
    return githubkit.GitHub(
        token, base_url=f"{credvault.url}{PROXY_PREFIX}/github", auto_retry=False
    )


def test_githubkit_graphql_queries_and_stars_under_a_default_grant(credvault, token, providers):
    github = github_client(credvault, token)
    viewer = github.graphql("query { viewer { login bio } }")
    star = github.graphql(
        "mutation($id: ID!) { addStar(input: {starrableId: $id}) { starrable { id } } }",
        {"id": "R_1"},
    )
    assert viewer == {"viewer": {"login": "octocat", "bio": f"Read with {REDACTED}"}}
    assert star == {"addStar": {"starrable": {"id": "R_1"}}}
    assert [r.path for r in providers["github"].requests] == ["/graphql", "/graphql"]
    assert_brokered(providers["github"], token, calls=2)


def test_githubkit_a_commit_that_could_write_a_workflow_needs_the_grant_to_name_it(
    credvault, token, providers, alice_bot
):
    github = github_client(credvault, token)
    with pytest.raises(RequestFailed) as raised:
        github.graphql(COMMIT, COMMIT_INPUT)
    response = raised.value.response
    assert response.status_code == 403
    assert response.headers["X-Credvault-Error"] == "sensitive_endpoint"
    assert "createCommitOnBranch" in response.json()["detail"]
    assert providers["github"].requests == []
    alice_bot("linear", {"service": "github", "graphql": ["createCommitOnBranch"]})
    committed = github.graphql(COMMIT, COMMIT_INPUT)
    assert committed["createCommitOnBranch"]["commit"]["oid"].startswith("4b825dc")
    assert providers["github"].executed == ["createCommitOnBranch"]
    assert_brokered(providers["github"], token, calls=1)
