"""Real SDKs from PyPI whose pagination follows absolute URLs in JSON bodies, and a download
that the provider redirects to another host, through credvault under gunicorn.

- `replicate`: `Client(base_url=<proxy>/replicate, api_token=<agent token>)`; its list pages
  come with `next` on api.replicate.com's own host (here the stand-in's), which the client
  requests as it is. credvault moves it onto the proxy, so the agent token never reaches the
  provider and every page is brokered.
- `zenpy`: a Zenpy client whose subdomain and domain name the proxy (`Zenpy(subdomain="127",
  domain="0.0.1:PORT/api/v1/agent/proxy/zendesk", oauth_token=<agent token>)`; with credvault at
  `https://cv.example.com`: `subdomain="cv", domain="example.com/api/v1/agent/proxy/zendesk"`).
  It pages users through `links.next` (cursor) and `next_page` (offset), each absolute.
- `githubkit`: a release asset downloaded with `Accept: application/octet-stream`, which GitHub
  answers 302 to a pre-signed URL on its storage host: credvault follows it without the
  credential, the SDK gets the file, and the storage host never sees the credential nor the
  agent token.

Each stand-in (tests/support/sdk_stand_ins.py) refuses a request without the stored credential, and
records every request, so that each test shows what reached each host.
"""

from __future__ import annotations

from collections.abc import Iterator

import githubkit
import pytest
import replicate
from replicate.pagination import paginate
from zenpy import Zenpy

from tests.support.harness import Gunicorn
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    marked,
    put_agent,
    served_env,
)
from tests.support.sdk_stand_ins import (
    GitHubReleaseStandIn,
    ReplicateStandIn,
    SdkStandIn,
    StorageStandIn,
    ZendeskStandIn,
    carries,
)

REDACTED = "[REDACTED]"
CREDENTIALS = {
    "replicate": "r8_" + marked("replicate"),
    "zendesk": marked("zendesk"),
    "github": marked("github"),
}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def storage() -> Iterator[StorageStandIn]:
    server = StorageStandIn("").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def providers(storage) -> Iterator[dict[str, SdkStandIn]]:
    servers: dict[str, SdkStandIn] = {
        "replicate": ReplicateStandIn(CREDENTIALS["replicate"]).start(),
        "zendesk": ZendeskStandIn(CREDENTIALS["zendesk"]).start(),
        "github": GitHubReleaseStandIn(CREDENTIALS["github"], storage_url=storage.url).start(),
    }
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, providers, storage) -> Iterator[Gunicorn]:
    """credvault under gunicorn, each service at its stand-in, the storage host allowed as a
    redirect's destination although it is plain http on loopback."""
    env = served_env(
        {name: p.url for name, p in providers.items()},
        CREDVAULT_OUTBOUND_ALLOWED_HOSTS=storage.url.split("//", 1)[1],
    )
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def token(alice_api, providers, storage, credvault) -> str:
    """Alice's agent's token, each service's credential stored (Zendesk's as an OAuth access
    token), every stand-in's record empty."""
    for service, value in CREDENTIALS.items():
        fields = creds(access_token=value) if service == "zendesk" else creds(api_key=value)
        assert alice_api.store(service, fields).status_code == 201
    assert put_agent(alice_api, "bot", list(CREDENTIALS), access=None).status_code == 201
    for server in (*providers.values(), storage):
        server.reset()
    return agent_token(alice_api, "bot")


@pytest.fixture
def proxy(credvault) -> str:
    return credvault.url + PROXY_PREFIX


def assert_brokered(provider: SdkStandIn, token: str, paths: list[str]) -> None:
    """The provider received exactly these requests (path and query), each with the stored
    credential and none with the agent token."""
    assert [received.path for received in provider.requests] == paths
    for received in provider.requests:
        assert provider.authorized(received.headers), received.path
        assert not carries(received, token), received.path


def test_replicate_pages_through_models_and_predictions(token, proxy, providers):
    client = replicate.Client(api_token=token, base_url=f"{proxy}/replicate")
    first = client.models.list()
    assert first.next == f"{proxy}/replicate/v1/models?cursor=Mg%3D%3D"
    assert first.previous is None
    models = [model for page in paginate(client.models.list) for model in page]
    predictions = [p for page in paginate(client.predictions.list) for p in page]
    assert [model.name for model in models] == [f"model-{n}" for n in range(5)]
    assert models[0].description == f"Listed for {REDACTED}"
    assert [p.id for p in predictions] == [f"pred{n:04d}" for n in range(5)]
    assert predictions[0].urls["get"] == f"{proxy}/replicate/v1/predictions/pred0000"
    pages = ["", "?cursor=Mg%3D%3D", "?cursor=NA%3D%3D"]
    assert_brokered(
        providers["replicate"],
        token,
        [f"/v1/models{pages[0]}", *(f"/v1/models{p}" for p in pages)]
        + [f"/v1/predictions{p}" for p in pages],
    )


def test_zenpy_pages_through_users_by_cursor_and_by_offset(token, proxy, providers, monkeypatch):
    monkeypatch.setenv("ZENPY_FORCE_SCHEME", "http")
    subdomain, _, domain = f"{proxy}/zendesk".split("//", 1)[1].partition(".")
    client = Zenpy(subdomain=subdomain, domain=domain, oauth_token=token)
    by_cursor = list(client.users(cursor_pagination=2))
    by_offset = list(client.users(cursor_pagination=False))
    for users in (by_cursor, by_offset):
        assert [user.id for user in users] == [1000 + n for n in range(5)]
        assert users[0].notes == f"Imported with {REDACTED}"
        assert users[0].url == f"{proxy}/zendesk/api/v2/users/1000.json"
    assert_brokered(
        providers["zendesk"],
        token,
        [
            # requests percent-encodes the brackets it is given.
            "/api/v2/users.json?page%5Bsize%5D=2",
            "/api/v2/users.json?page%5Bsize%5D=2&page%5Bafter%5D=2",
            "/api/v2/users.json?page%5Bsize%5D=2&page%5Bafter%5D=4",
            "/api/v2/users.json",
            "/api/v2/users.json?page=2&per_page=2",
            "/api/v2/users.json?page=3&per_page=2",
        ],
    )


def test_githubkit_downloads_a_release_asset_that_github_redirects_to_storage(
    token, proxy, providers, storage
):
    client = githubkit.GitHub(token, base_url=f"{proxy}/github", auto_retry=False)
    asset = client.rest.repos.get_release_asset("octocat", "hello", 1).parsed_data
    download = client.request(
        "GET",
        "/repos/octocat/hello/releases/assets/1",
        headers={"Accept": "application/octet-stream"},
    )
    assert (asset.name, asset.size) == ("hello.tar.gz", len(StorageStandIn.FILE))
    assert download.status_code == 200
    assert download.content == StorageStandIn.FILE
    assert_brokered(
        providers["github"],
        token,
        ["/repos/octocat/hello/releases/assets/1", "/repos/octocat/hello/releases/assets/1"],
    )
    [fetched] = storage.requests
    assert fetched.path == "/releases/1/hello.tar.gz?X-Amz-Expires=300&X-Amz-Signature=5f1e"
    assert not carries(fetched, token)
    assert not carries(fetched, CREDENTIALS["github"])
    assert not {"authorization", "accept"} & {name.lower() for name in fetched.headers}
