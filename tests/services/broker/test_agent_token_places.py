"""The agent token wherever a provider's SDK puts its key: `Authorization` with `Bearer` or
`token`, `Authorization: Basic` as the user or the password (whatever the other part is: an
account SID, an e-mail address, empty, `x`; it never reaches the provider), and on a brokered
call the header of the service's credential placement (`x-api-key`, `PRIVATE-TOKEN`). Two
different tokens are 400 `ambiguous_credentials`; the header that carried the token never
reaches the provider. The account API keeps to `Bearer`."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from tests.support.helpers import assert_problem, creds, marked

PREFIX = "/api/v1/agent/proxy"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def agent(api, services: list) -> str:
    response = api.raw("PUT", "/api/v1/agents/bot", json.dumps({"services": services}))
    assert response.status_code == 201, response.content
    issued = api.raw("POST", "/api/v1/agents/bot/tokens", b"")
    assert issued.status_code == 201
    return issued.json()["token"]


def get(path: str, **headers):
    return Client(raise_request_exception=False).get(path, headers=headers)


@pytest.fixture
def reader(alice_api):
    assert alice_api.store("github", creds(api_key="gh-value")).status_code == 201
    return agent(alice_api, [{"service": "github", "access": "read"}])


@pytest.mark.django_db
class TestAuthorizationForms:
    @pytest.mark.parametrize(
        "header",
        [
            "Bearer {t}",
            "bearer {t}",
            "token {t}",
            "TOKEN {t}",
            "basic:{t}:",
            "basic:{t}:x",
            "basic::{t}",
            "basic:x:{t}",
        ],
    )
    def test_the_agent_read_takes_each_form(self, reader, header):
        if header.startswith("basic:"):
            _, user, password = header.split(":")
            value = basic(user.format(t=reader), password.format(t=reader))
        else:
            value = header.format(t=reader)
        response = get("/api/v1/agent/credentials/github", Authorization=value)
        assert response.status_code == 200, response.content
        assert response.json()["credentials"] == [{"keyName": "api_key", "value": "gh-value"}]

    @pytest.mark.parametrize(
        ("user", "password"),
        [
            ("{t}", "other"),
            ("someone", "{t}"),
            ("AC0123456789abcdef0123456789abcdef", "{t}"),
            ("me@example.com", "{t}"),
            ("{t}", "a:password:with:colons"),
        ],
    )
    def test_a_basic_pair_with_anything_as_its_other_part_authenticates(
        self, reader, user, password
    ):
        value = basic(user.format(t=reader), password.format(t=reader))
        response = get("/api/v1/agent/credentials/github", Authorization=value)
        assert response.status_code == 200, response.content
        assert response.json()["credentials"] == [{"keyName": "api_key", "value": "gh-value"}]

    @pytest.mark.parametrize(
        ("user", "password"), [("someone", "other"), ("", ""), ("someone", ""), ("x", "x")]
    )
    def test_a_basic_pair_without_a_token_is_refused(self, reader, user, password):
        response = get("/api/v1/agent/credentials/github", Authorization=basic(user, password))
        assert_problem(response, 401, "invalid_token")

    def test_a_basic_pair_of_two_different_tokens_is_ambiguous(self, reader, alice_api):
        other = alice_api.raw("POST", "/api/v1/agents/bot/tokens", b"").json()["token"]
        response = get("/api/v1/agent/credentials/github", Authorization=basic(reader, other))
        assert_problem(response, 400, "ambiguous_credentials")

    def test_a_basic_pair_of_the_same_token_twice_is_one(self, reader):
        response = get("/api/v1/agent/credentials/github", Authorization=basic(reader, reader))
        assert response.status_code == 200, response.content

    def test_an_account_token_in_a_basic_pair_is_insufficient_scope(self, reader, alice_api):
        value = basic("me@example.com", alice_api.token)
        response = get("/api/v1/agent/credentials/github", Authorization=value)
        assert_problem(response, 403, "insufficient_scope")

    def test_the_account_api_keeps_to_bearer(self, alice_api):
        response = get("/api/v1/services", Authorization=f"token {alice_api.token}")
        assert_problem(response, 401, "not_authenticated")


@pytest.mark.django_db
class TestPlacementHeaders:
    def test_anthropics_x_api_key_carries_the_agent_token(self, alice_api, provider_server):
        key = marked("anthropic")
        assert alice_api.store("anthropic", creds(api_key=key)).status_code == 201
        token = agent(alice_api, ["anthropic"])
        response = Client().post(
            f"{PREFIX}/anthropic/v1/messages",
            b"{}",
            content_type="application/json",
            headers={"x-api-key": token},
        )
        assert response.status_code == 200, response.content
        [sent] = provider_server.requests
        assert sent.headers["x-api-key"] == key
        assert token not in json.dumps(sent.headers)

    def test_gitlabs_private_token_carries_it_and_is_not_sent_with_an_oauth_set(
        self, alice_api, provider_server
    ):
        access = marked("gitlab-oauth")
        assert alice_api.store("gitlab", creds(access_token=access)).status_code == 201
        token = agent(alice_api, ["gitlab"])
        response = get(f"{PREFIX}/gitlab/api/v4/user", **{"PRIVATE-TOKEN": token})
        assert response.status_code == 200, response.content
        [sent] = provider_server.requests
        assert sent.headers["Authorization"] == f"Bearer {access}"
        assert "PRIVATE-TOKEN" not in {name.upper() for name in sent.headers}
        assert token not in json.dumps(sent.headers)

    def test_the_same_token_twice_is_one(self, alice_api, provider_server):
        assert alice_api.store("anthropic", creds(api_key=marked())).status_code == 201
        token = agent(alice_api, ["anthropic"])
        response = get(
            f"{PREFIX}/anthropic/v1/models",
            Authorization=f"Bearer {token}",
            **{"x-api-key": token},
        )
        assert response.status_code == 200

    def test_two_different_tokens_are_ambiguous_and_nothing_is_sent(
        self, alice_api, provider_server
    ):
        assert alice_api.store("anthropic", creds(api_key=marked())).status_code == 201
        token = agent(alice_api, ["anthropic"])
        response = get(
            f"{PREFIX}/anthropic/v1/models",
            Authorization=f"Bearer {token}",
            **{"x-api-key": "cva_another"},
        )
        assert_problem(response, 400, "ambiguous_credentials")
        assert provider_server.requests == []


@pytest.mark.django_db
class TestBasicAsDevelopersWriteIt:
    """`Client(ACCOUNT_SID, AGENT_TOKEN)`, `Jira(username=EMAIL, password=AGENT_TOKEN)`: the
    agent token beside whatever the SDK puts in the other part, which never reaches the
    provider; the stored set's own pair does."""

    def test_the_other_part_is_dropped_and_the_stored_pair_sent(self, alice_api, provider_server):
        email, api_token = "stored@example.com", marked("jira")
        assert alice_api.store("jira", creds(email=email, api_token=api_token)).status_code
        token = agent(alice_api, ["jira"])
        other = "MARKED-other-part@example.org"
        response = get(f"{PREFIX}/jira/rest/api/3/myself", Authorization=basic(other, token))
        assert response.status_code == 200, response.content
        [sent] = provider_server.requests
        pair = base64.b64encode(f"{email}:{api_token}".encode()).decode()
        assert sent.headers["Authorization"] == f"Basic {pair}"
        everything = json.dumps(sent.headers) + sent.path + sent.body.decode("latin-1")
        for value in (other, base64.b64encode(other.encode()).decode()[:16], token):
            assert value not in everything

    def test_the_token_as_the_user_name_with_a_password_beside_it(self, alice_api, provider_server):
        sid, auth_token = "AC" + "0123456789abcdef" * 2, marked("twilio")
        assert alice_api.store("twilio", creds(account_sid=sid, auth_token=auth_token)).status_code
        token = agent(alice_api, ["twilio"])
        value = basic(token, "MARKED-a-password-of-its-own")
        response = get(
            f"{PREFIX}/twilio/2010-04-01/Accounts/{sid}/Messages.json", Authorization=value
        )
        assert response.status_code == 200, response.content
        [sent] = provider_server.requests
        pair = base64.b64encode(f"{sid}:{auth_token}".encode()).decode()
        assert sent.headers["Authorization"] == f"Basic {pair}"
        assert "MARKED-a-password" not in json.dumps(sent.headers)

    def test_basic_beside_another_token_in_the_placement_header_is_ambiguous(
        self, alice_api, provider_server
    ):
        assert alice_api.store("anthropic", creds(api_key=marked())).status_code == 201
        token = agent(alice_api, ["anthropic"])
        response = get(
            f"{PREFIX}/anthropic/v1/models",
            Authorization=basic("me@example.com", token),
            **{"x-api-key": "cva_another"},
        )
        assert_problem(response, 400, "ambiguous_credentials")
        assert provider_server.requests == []

    def test_two_tokens_in_one_pair_are_ambiguous_and_nothing_is_sent(
        self, alice_api, provider_server
    ):
        assert alice_api.store("jira", creds(email="a@example.com", api_token=marked())).status_code
        token = agent(alice_api, ["jira"])
        response = get(f"{PREFIX}/jira/rest/api/3/myself", Authorization=basic(token, "cva_x"))
        assert_problem(response, 400, "ambiguous_credentials")
        assert provider_server.requests == []

    def test_mcp_reads_the_token_the_same_way(self, alice_api):
        assert alice_api.store("github", creds(api_key=marked())).status_code == 201
        token = agent(alice_api, ["github"])
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        response = Client().post(
            "/mcp",
            json.dumps(body),
            content_type="application/json",
            headers={
                "Authorization": basic("me@example.com", token),
                "Accept": "application/json, text/event-stream",
            },
        )
        assert response.status_code == 200, response.content
        refused = Client().post(
            "/mcp",
            json.dumps(body),
            content_type="application/json",
            headers={
                "Authorization": basic("me@example.com", "not-a-token"),
                "Accept": "application/json, text/event-stream",
            },
        )
        assert refused.status_code == 401
