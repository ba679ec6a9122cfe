"""The providers' own SDKs, from PyPI, work unchanged through credvault's proxy.

credvault runs under gunicorn as `make run` serves it, each provider is a stand-in on
127.0.0.1 (tests/support/sdk_stand_ins.py) that behaves as the provider documents it, and each SDK
is configured as an agent's developer configures it: its base URL at the proxy
(`{credvault}/api/v1/agent/proxy/{service}...`, docs/sdks.md) and the agent token as its key.
Each test shows that the SDK's call returned the provider's data, that the provider received
the stored credential in its own place and never the agent token, and that a credential the
provider echoes reaches the SDK as [REDACTED]. The OpenAI stream arrives chunk by chunk; the
GitHub SDKs' second page, which the provider announces with a Link to its own host, comes
through credvault too.

Retries are off in each SDK that retries by itself, so that a failure shows at once, not after
a back-off; nothing else differs from a user's configuration.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import anthropic
import githubkit
import gitlab
import openai
import pytest
import slack_sdk
import stripe
from github import Auth, Github

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
    AnthropicStandIn,
    GitHubRestStandIn,
    GitLabStandIn,
    OpenAIStandIn,
    SdkStandIn,
    SlackStandIn,
    StripeStandIn,
    carries,
)
from tests.support.stand_ins import Recorded

REDACTED = "[REDACTED]"
# The stored credential of each service: marked values, Stripe's a secret key's shape.
CREDENTIALS = {
    "openai": marked("openai"),
    "anthropic": marked("anthropic"),
    "slack": marked("slack"),
    "stripe": "sk_test_" + marked("stripe"),
    "github": marked("github"),
    "gitlab": marked("gitlab"),
}
STAND_INS = {
    "openai": OpenAIStandIn,
    "anthropic": AnthropicStandIn,
    "slack": SlackStandIn,
    "stripe": StripeStandIn,
    "github": GitHubRestStandIn,
    "gitlab": GitLabStandIn,
}
HELLO = [{"role": "user", "content": "Say hello."}]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, SdkStandIn]]:
    """One stand-in per service, each expecting its service's stored credential."""
    servers = {service: kind(CREDENTIALS[service]).start() for service, kind in STAND_INS.items()}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, providers) -> Iterator[Gunicorn]:
    """credvault under gunicorn (one worker) on the test database, every service pointed at its
    stand-in. One for the module: each test stores its own account, set and agent, and the
    database is emptied after each."""
    env = served_env({name: p.url for name, p in providers.items()})
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def token(alice_api, providers, credvault) -> str:
    """The token of Alice's agent `bot`, granted every service brokered (all methods, all
    paths); each service's credential stored. The stand-ins' records start empty."""
    for service, value in CREDENTIALS.items():
        assert alice_api.store(service, creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", list(CREDENTIALS), access=None).status_code == 201
    for provider in providers.values():
        provider.reset()
    return agent_token(alice_api, "bot")


@pytest.fixture
def proxy(credvault) -> str:
    """The proxy's URL, without the service: an SDK's base URL starts with it."""
    return credvault.url + PROXY_PREFIX


def assert_brokered(provider: SdkStandIn, token: str, calls: int) -> None:
    """The provider received `calls` requests, each with the stored credential in its own
    place and none with the agent token anywhere (a header, the path, the body)."""
    assert len(provider.requests) == calls, [r.path for r in provider.requests]
    for received in provider.requests:
        assert provider.authorized(received.headers), f"no stored credential: {received.path}"
        assert not carries(received, token), (
            f"the agent token reached the provider: {received.path}"
        )


# --- OpenAI ----------------------------------------------------------------------------------


def test_openai_lists_models_and_completes_a_chat(token, proxy, providers):
    client = openai.OpenAI(base_url=f"{proxy}/openai/v1", api_key=token, max_retries=0)
    models = [model.id for model in client.models.list()]
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
    assert models == ["gpt-4o-mini", "gpt-4o"]
    assert completion.id == "chatcmpl-standin1"
    assert completion.choices[0].message.content == f"Hello! You called me with {REDACTED}."
    assert completion.usage.total_tokens == 21
    received = providers["openai"]
    assert [(r.method, r.path) for r in received.requests] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert json.loads(received.requests[1].body)["messages"] == HELLO
    assert_brokered(received, token, calls=2)


def test_openai_stream_arrives_chunk_by_chunk(token, proxy, providers):
    """Six chunks 400 ms apart: each reaches the SDK before the provider sends the next."""
    client = openai.OpenAI(base_url=f"{proxy}/openai/v1", api_key=token, max_retries=0)
    started = time.monotonic()
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=True)
    arrived, text, finish = [], [], None
    for chunk in stream:
        arrived.append(time.monotonic())
        text.append(chunk.choices[0].delta.content or "")
        finish = chunk.choices[0].finish_reason or finish
    # The SDK stops at [DONE]; the stand-in notes its send time just after.
    assert providers["openai"].stream_ended.wait(5)
    sent_at = providers["openai"].sent_at
    assert "".join(text) == "".join(OpenAIStandIn.STREAMED_PIECES)
    assert finish == "stop"
    assert len(arrived) == 6
    assert len(sent_at) == 7  # the six chunks, then [DONE]
    for number in range(6):
        assert arrived[number] < sent_at[number + 1], f"chunk {number} waited for the next"
    print(
        f"\nOpenAI stream through credvault: first chunk {1000 * (arrived[0] - sent_at[0]):.1f} ms"
        f" after the provider sent it, {1000 * (arrived[0] - started):.1f} ms after the call"
    )
    assert_brokered(providers["openai"], token, calls=1)


# --- Anthropic -------------------------------------------------------------------------------

# How an agent's developer may give the anthropic SDK the agent token, and the header the
# installed SDK then sends it in: 2.14 sends `api_key=` as `Authorization: Bearer`, like
# `auth_token=`; a developer who wants the `x-api-key` header sets it.
ANTHROPIC_TOKEN_PLACES = {
    "api_key": (lambda token: {"api_key": token}, "authorization"),
    "auth_token": (lambda token: {"auth_token": token}, "authorization"),
    "x-api-key": (lambda token: {"default_headers": {"x-api-key": token}}, "x-api-key"),
}


@pytest.mark.parametrize("place", list(ANTHROPIC_TOKEN_PLACES))
def test_anthropic_creates_and_streams_a_message(token, proxy, providers, place, monkeypatch):
    # No credential or profile of this machine's environment may take the token's place.
    for name in [name for name in os.environ if name.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    arguments, header = ANTHROPIC_TOKEN_PLACES[place]
    client = anthropic.Anthropic(base_url=f"{proxy}/anthropic", max_retries=0, **arguments(token))
    carrying = {
        name.lower()
        for name, value in client.default_headers.items()
        if value and token in str(value)
    }
    assert carrying == {header}
    message = client.messages.create(model=AnthropicStandIn.MODEL, max_tokens=64, messages=HELLO)
    assert message.content[0].text == f"Hello! You called me with {REDACTED}."
    assert message.stop_reason == "end_turn"
    with client.messages.stream(
        model=AnthropicStandIn.MODEL, max_tokens=64, messages=HELLO
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    } <= set(kinds)
    assert final.content[0].text == "".join(AnthropicStandIn.STREAMED_PIECES)
    assert final.stop_reason == "end_turn"
    received = providers["anthropic"]
    assert [(r.method, r.path) for r in received.requests] == [("POST", "/v1/messages")] * 2
    assert_brokered(received, token, calls=2)


# --- Slack -----------------------------------------------------------------------------------


def test_slack_sdk_tests_auth_and_posts_a_message(token, proxy, providers):
    client = slack_sdk.WebClient(token=token, base_url=f"{proxy}/slack/api/")
    identity = client.auth_test()
    posted = client.chat_postMessage(channel="C0EXAMPLE", text="Build passed")
    assert identity["ok"] is True
    assert identity["team_id"] == "T0EXAMPLE"
    assert identity["user"] == f"bot with {REDACTED}"
    assert posted["ok"] is True
    assert (posted["channel"], posted["message"]["text"]) == ("C0EXAMPLE", "Build passed")
    received = providers["slack"]
    assert [(r.method, r.path) for r in received.requests] == [
        ("POST", "/api/auth.test"),
        ("POST", "/api/chat.postMessage"),
    ]
    assert json.loads(received.requests[1].body) == {"channel": "C0EXAMPLE", "text": "Build passed"}
    assert_brokered(received, token, calls=2)


# --- Stripe ----------------------------------------------------------------------------------


def test_stripe_pages_through_customers(token, proxy, providers):
    """Five customers, two a page: the SDK's auto-paging asks for three pages, each after the
    last customer of the one before."""
    client = stripe.StripeClient(
        token, base_addresses={"api": f"{proxy}/stripe"}, max_network_retries=0
    )
    customers = list(client.v1.customers.list(params={"limit": 2}).auto_paging_iter())
    assert [customer.id for customer in customers] == [
        f"cus_standin{number:04d}" for number in range(1, 6)
    ]
    assert customers[0].description == f"Created with {REDACTED}"
    received = providers["stripe"]
    assert [r.path for r in received.requests] == [
        "/v1/customers?limit=2",
        "/v1/customers?limit=2&starting_after=cus_standin0002",
        "/v1/customers?limit=2&starting_after=cus_standin0004",
    ]
    assert_brokered(received, token, calls=3)


# --- GitHub ----------------------------------------------------------------------------------


def asked(request: Recorded) -> tuple[str, dict[str, str]]:
    """A request's path and its query's parameters (an SDK may order them either way)."""
    parts = urlsplit(request.path)
    return parts.path, dict(parse_qsl(parts.query))


def assert_second_page_through_credvault(provider: SdkStandIn, token: str) -> None:
    """The second page was asked of the provider by credvault (with the stored credential),
    not by the SDK at the provider's own address (with the agent token)."""
    pages = [r for r in provider.requests if asked(r)[0] == "/user/repos"]
    assert len(pages) == 2
    assert asked(pages[1])[1]["page"] == "2"
    assert provider.authorized(pages[1].headers)
    assert not carries(pages[1], token)


def test_pygithub_reads_the_user_and_pages_through_repositories(token, proxy, providers):
    client = Github(base_url=f"{proxy}/github", auth=Auth.Token(token), per_page=2, retry=None)
    user = client.get_user()
    assert user.login == "octocat"
    assert user.bio == f"Signed in with {REDACTED}"
    names = [repository.full_name for repository in user.get_repos()]
    assert names == ["octocat/repo-1", "octocat/repo-2", "octocat/repo-3"]
    received = providers["github"]
    assert [asked(r) for r in received.requests] == [
        ("/user", {}),
        ("/user/repos", {"per_page": "2"}),
        ("/user/repos", {"per_page": "2", "page": "2"}),
    ]
    assert_second_page_through_credvault(received, token)
    assert_brokered(received, token, calls=3)


def test_githubkit_reads_the_user_and_pages_through_repositories(token, proxy, providers):
    client = githubkit.GitHub(token, base_url=f"{proxy}/github", auto_retry=False)
    user = client.rest.users.get_authenticated().parsed_data
    assert user.login == "octocat"
    assert user.bio == f"Signed in with {REDACTED}"
    listed = client.rest.paginate(client.rest.repos.list_for_authenticated_user, per_page=2)
    names = [repository.full_name for repository in listed]
    assert names == ["octocat/repo-1", "octocat/repo-2", "octocat/repo-3"]
    received = providers["github"]
    assert [asked(r) for r in received.requests] == [
        ("/user", {}),
        ("/user/repos", {"per_page": "2"}),
        ("/user/repos", {"per_page": "2", "page": "2"}),
    ]
    assert_second_page_through_credvault(received, token)
    assert_brokered(received, token, calls=3)


# --- GitLab ----------------------------------------------------------------------------------


def test_python_gitlab_gets_a_project_by_its_path(token, proxy, providers):
    client = gitlab.Gitlab(f"{proxy}/gitlab", private_token=token)
    project = client.projects.get("group/name")
    assert (project.id, project.path_with_namespace) == (42, "group/name")
    assert project.description == f"Read with {REDACTED}"
    received = providers["gitlab"]
    assert [(r.method, r.path) for r in received.requests] == [
        ("GET", "/api/v4/projects/group%2Fname")
    ]
    assert_brokered(received, token, calls=1)
