"""The agent token wherever a provider's SDK puts its key: `Authorization` with `Bearer` or
`token`, `Authorization: Basic` as the user or the password (the other part empty or `x`), and
on a brokered call the header of the service's credential placement (`x-api-key`,
`PRIVATE-TOKEN`). Two different tokens are 400 `ambiguous_credentials`; the header that carried
the token never reaches the provider. The account API keeps to `Bearer`."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from tests.support import assert_problem, creds, marked

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

    @pytest.mark.parametrize(("user", "password"), [("{t}", "other"), ("someone", "{t}")])
    def test_a_basic_pair_with_another_part_is_refused(self, reader, user, password):
        value = basic(user.format(t=reader), password.format(t=reader))
        response = get("/api/v1/agent/credentials/github", Authorization=value)
        assert_problem(response, 401, "invalid_token")

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
