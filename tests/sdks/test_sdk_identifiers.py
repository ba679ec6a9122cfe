"""SDKs that send an identifier beside the agent token in Basic auth, and read it back in the
provider's answers, work unchanged through credvault's proxy: Twilio's
`Client(ACCOUNT_SID, AGENT_TOKEN)` and atlassian-python-api's
`Jira(url=..., username=EMAIL, password=AGENT_TOKEN)`, from PyPI.

credvault runs under gunicorn as `make run` serves it, each provider is a stand-in on
127.0.0.1 (tests/support/sdk_stand_ins.py) that takes only the stored Basic pair, and each SDK is
configured as a developer configures it (docs/sdks.md). Each test shows that the SDK's call
returned the provider's data; that the provider received the stored pair and never the agent
token nor the pair's other part as the SDK sent it; that the identifier (the Account SID, the
e-mail address) reaches the SDK intact, so that Twilio's `next_page_uri` leads to the next page
through credvault; and that the secret echoed, and the pair that holds it, reach it as
[REDACTED].
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator

import pytest
from atlassian import Jira
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client as TwilioClient

from tests.support.harness import Gunicorn
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    marked,
    put_agent,
    served_env,
)
from tests.support.sdk_stand_ins import JiraStandIn, SdkStandIn, TwilioStandIn, carries

REDACTED = "[REDACTED]"
ACCOUNT_SID = "AC" + secrets.token_hex(16)
AUTH_TOKEN = marked("twilio")
EMAIL = "mia.krystof@example.com"
API_TOKEN = marked("jira")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, SdkStandIn]]:
    servers = {
        "twilio": TwilioStandIn(ACCOUNT_SID, AUTH_TOKEN, messages=3).start(),
        "jira": JiraStandIn(EMAIL, API_TOKEN).start(),
    }
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, providers) -> Iterator[Gunicorn]:
    """credvault under gunicorn (one worker) on the test database, each service pointed at its
    stand-in."""
    env = served_env({name: p.url for name, p in providers.items()})
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def token(alice_api, providers, credvault) -> str:
    """The token of Alice's agent `bot`, granted both services brokered (the default grant),
    with Twilio's and Jira's sets stored. The stand-ins' records start empty."""
    twilio = creds(account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    assert alice_api.store("twilio", twilio).status_code == 201
    assert alice_api.store("jira", creds(email=EMAIL, api_token=API_TOKEN)).status_code == 201
    assert put_agent(alice_api, "bot", ["twilio", "jira"], access=None).status_code == 201
    for provider in providers.values():
        provider.reset()
    return agent_token(alice_api, "bot")


@pytest.fixture
def proxy(credvault) -> str:
    return credvault.url + PROXY_PREFIX


def assert_brokered(provider: SdkStandIn, token: str, calls: int, *, others: tuple = ()) -> None:
    """The provider received `calls` requests, each with the stored pair, none with the agent
    token anywhere, nor any of `others` (what the SDK put beside the token)."""
    assert len(provider.requests) == calls, [r.path for r in provider.requests]
    for received in provider.requests:
        assert provider.authorized(received.headers), f"no stored pair: {received.path}"
        assert not carries(received, token), f"the agent token reached it: {received.path}"
        for other in others:
            assert not carries(received, other), f"the SDK's other part reached it: {other}"


# --- Twilio ----------------------------------------------------------------------------------


def twilio_client(proxy: str, account_sid: str, token: str) -> TwilioClient:
    """Twilio's client as a developer points it elsewhere: the account's SID and the agent
    token where the auth token goes, the REST domain's base URL at the proxy."""
    client = TwilioClient(account_sid, token, http_client=TwilioHttpClient(max_retries=0))
    client.api.base_url = f"{proxy}/twilio"
    return client


def test_twilio_lists_messages_and_follows_next_page_uri_through_credvault(token, proxy, providers):
    client = twilio_client(proxy, ACCOUNT_SID, token)
    messages = client.messages.list(page_size=2)
    assert [m.sid for m in messages] == [f"SM{n:032x}" for n in (3, 2, 1)]
    # The Account SID, an identifier, comes back as the provider wrote it.
    assert {m.account_sid for m in messages} == {ACCOUNT_SID}
    assert messages[0].uri == f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/SM{3:032x}.json"
    # The pair that holds the auth token, echoed, does not.
    assert messages[0].body == f"Sent with Basic {REDACTED}"
    received = providers["twilio"]
    listing = f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
    assert [r.path for r in received.requests] == [
        f"{listing}?PageSize=2",
        f"{listing}?PageSize=2&Page=1&PageToken=PASM{2:032x}",
    ]
    assert_brokered(received, token, calls=2)


def test_twilio_pages_by_hand_with_the_uri_it_was_given(token, proxy, providers):
    client = twilio_client(proxy, ACCOUNT_SID, token)
    page = client.api.v2010.account.messages.page(page_size=2)
    assert page.next_page_url == (
        f"{proxy}/twilio/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
        f"?PageSize=2&Page=1&PageToken=PASM{2:032x}"
    )
    following = page.next_page()
    assert [m.sid for m in following] == [f"SM{1:032x}"]
    assert following.next_page_url is None
    assert_brokered(providers["twilio"], token, calls=2)


def test_twilio_with_another_sid_beside_the_token_still_reaches_the_stored_account(
    token, proxy, providers
):
    """The SID the SDK sends in the pair is dropped: the stored pair goes instead. (The SDK
    builds its URLs from the SID it was given, so a developer gives it the stored one.)"""
    other_sid = "AC" + "f" * 32
    client = TwilioClient(other_sid, token, account_sid=ACCOUNT_SID)
    client.api.base_url = f"{proxy}/twilio"
    assert len(client.messages.list(page_size=5)) == 3
    assert_brokered(providers["twilio"], token, calls=1, others=(other_sid,))


# --- Jira ------------------------------------------------------------------------------------


def test_jira_myself_names_the_stored_email_intact(token, proxy, providers):
    jira = Jira(url=f"{proxy}/jira", username=EMAIL, password=token)
    me = jira.myself()
    assert me["emailAddress"] == EMAIL
    assert me["accountId"] == JiraStandIn.ACCOUNT_ID
    assert [(r.method, r.path) for r in providers["jira"].requests] == [
        ("GET", "/rest/api/2/myself")
    ]
    assert_brokered(providers["jira"], token, calls=1)


def test_jira_issue_keeps_the_email_and_redacts_the_token(token, proxy, providers):
    jira = Jira(url=f"{proxy}/jira", username="someone.else@example.org", password=token)
    issue = jira.issue(JiraStandIn.ISSUE_KEY)
    assert issue["key"] == JiraStandIn.ISSUE_KEY
    assert issue["fields"]["reporter"]["emailAddress"] == EMAIL
    assert issue["fields"]["description"] == f"Filed with the API token {REDACTED}"
    assert API_TOKEN not in json.dumps(issue)
    assert_brokered(providers["jira"], token, calls=1, others=("someone.else@example.org",))


def test_jira_with_the_token_as_the_user_name(token, proxy, providers):
    jira = Jira(url=f"{proxy}/jira", username=token, password="x", api_version="3")
    assert jira.myself()["emailAddress"] == EMAIL
    [received] = providers["jira"].requests
    assert received.path == "/rest/api/3/myself"
    pair = base64.b64encode(f"{EMAIL}:{API_TOKEN}".encode()).decode()
    assert received.headers["Authorization"] == f"Basic {pair}"
    assert_brokered(providers["jira"], token, calls=1)
