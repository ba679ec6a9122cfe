"""Endpoints that widen access, reached through the providers' own SDKs: PyGithub adding a
collaborator or writing a workflow, python-gitlab writing `.gitlab-ci.yml` in a project named
by its path. credvault runs under gunicorn, each provider is a stand-in on 127.0.0.1
(tests/support/sdk_stand_ins.py), each SDK is configured as docs/sdks.md says. A default grant is
refused (the SDK raises its own error with the status 403, and the provider receives nothing);
a grant that names the path reaches the provider, which receives the stored credential."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import gitlab
import pytest
from github import Auth, Github, GithubException

from tests.support.harness import Gunicorn
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    marked,
    put_agent,
    served_env,
)
from tests.support.sdk_stand_ins import GitHubWritesStandIn, GitLabStandIn, SdkStandIn, carries

CREDENTIALS = {"github": marked("github"), "gitlab": marked("gitlab")}
WORKFLOW = ".github/workflows/exfiltrate.yml"
REFUSED = "the grant must name its path explicitly"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, SdkStandIn]]:
    servers = {
        "github": GitHubWritesStandIn(CREDENTIALS["github"]).start(),
        "gitlab": GitLabStandIn(CREDENTIALS["gitlab"]).start(),
    }
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, providers) -> Iterator[Gunicorn]:
    env = served_env({name: p.url for name, p in providers.items()})
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def token(alice_api, providers, credvault) -> str:
    """The token of Alice's agent `bot`, with the default grant (every method, every path) on
    both services; their credentials stored, the stand-ins' records empty."""
    for service, value in CREDENTIALS.items():
        assert alice_api.store(service, creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", list(CREDENTIALS), access=None).status_code == 201
    for provider in providers.values():
        provider.reset()
    return agent_token(alice_api, "bot")


@pytest.fixture
def github(token, credvault) -> Github:
    # lazy: get_repo makes no request of its own, so each test's first request is its call.
    return Github(
        base_url=f"{credvault.url}{PROXY_PREFIX}/github",
        auth=Auth.Token(token),
        retry=None,
        lazy=True,
    )


def test_pygithub_cannot_add_a_collaborator_with_a_default_grant(github, providers):
    repo = github.get_repo("octocat/repo-1")
    with pytest.raises(GithubException) as raised:
        repo.add_to_collaborators("mallory", permission="admin")
    assert raised.value.status == 403
    assert raised.value.data["code"] == "sensitive_endpoint"
    assert REFUSED in raised.value.data["detail"]
    assert providers["github"].requests == []


def test_pygithub_cannot_write_a_workflow_with_a_default_grant(github, providers):
    repo = github.get_repo("octocat/repo-1")
    with pytest.raises(GithubException) as raised:
        repo.create_file(WORKFLOW, "Add a workflow", "on: push\n", branch="main")
    assert raised.value.status == 403
    assert raised.value.data["code"] == "sensitive_endpoint"
    assert providers["github"].requests == []


def test_pygithub_writes_a_workflow_once_the_grant_names_the_path(
    alice_api, github, token, providers
):
    named = {"service": "github", "paths": ["/repos/octocat/repo-1/contents/.github/workflows"]}
    assert put_agent(alice_api, "bot", [named], access=None).status_code == 200
    repo = github.get_repo("octocat/repo-1")
    written = repo.create_file(WORKFLOW, "Add a workflow", "on: push\n", branch="main")
    assert written["content"].path == WORKFLOW
    assert written["commit"].sha == "7638417db6d59f3c431d3e1f261cc637155684cd"
    [received] = providers["github"].requests
    assert (received.method, received.path) == ("PUT", f"/repos/octocat/repo-1/contents/{WORKFLOW}")
    assert json.loads(received.body)["content"] == base64.b64encode(b"on: push\n").decode()
    assert providers["github"].authorized(received.headers)
    assert not carries(received, token)
    # The grant names that directory only: a collaborator is still refused.
    with pytest.raises(GithubException) as raised:
        repo.add_to_collaborators("mallory", permission="admin")
    assert raised.value.status == 403
    assert len(providers["github"].requests) == 1


def test_pygithub_writes_other_files_with_a_default_grant(github, providers):
    repo = github.get_repo("octocat/repo-1")
    written = repo.create_file("docs/workflows.md", "Document", "# Workflows\n", branch="main")
    assert written["content"].path == "docs/workflows.md"
    [received] = providers["github"].requests
    assert (received.method, received.path) == (
        "PUT",
        "/repos/octocat/repo-1/contents/docs/workflows.md",
    )


def test_python_gitlab_cannot_write_the_ci_definition_of_a_project_named_by_its_path(
    token, credvault, providers
):
    client = gitlab.Gitlab(f"{credvault.url}{PROXY_PREFIX}/gitlab", private_token=token)
    project = client.projects.get("group/name", lazy=True)
    with pytest.raises(gitlab.exceptions.GitlabCreateError) as raised:
        project.files.create(
            {
                "file_path": ".gitlab-ci.yml",
                "branch": "main",
                "content": "job:\n  script: env\n",
                "commit_message": "Add CI",
            }
        )
    assert raised.value.response_code == 403
    assert providers["gitlab"].requests == []
