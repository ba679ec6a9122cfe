"""An agent's tokens through the account API: listed without a token or digest, revoked one
by one; each request audited."""

from __future__ import annotations

import json

import pytest

from services import bearer_tokens
from services.models import AgentToken, AuditEvent
from tests.support.helpers import agent_token, assert_problem, put_agent, read

pytestmark = pytest.mark.django_db

TOKEN_MEMBERS = {"prefix", "createdAt", "lastUsedAt", "expiresAt", "revokedAt"}


def listed(api, name: str):
    return api.client.get(f"/api/v1/agents/{name}/tokens", headers=api.headers())


def revoke(api, name: str, prefix: str):
    return api.client.delete(f"/api/v1/agents/{name}/tokens/{prefix}", headers=api.headers())


@pytest.fixture
def two_tokens(alice_api) -> list[str]:
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    first = agent_token(alice_api, "bot")
    second = agent_token(alice_api, "bot", json.dumps({"expiresInDays": 7}))
    return [first, second]


def test_the_list_shows_prefixes_and_dates_never_a_token(alice_api, two_tokens):
    response = listed(alice_api, "Bot")
    assert response.status_code == 200
    body = response.json()
    assert [entry["prefix"] for entry in body] == [token[:12] for token in two_tokens]
    assert all(set(entry) == TOKEN_MEMBERS for entry in body)
    assert body[0]["expiresAt"] is None
    assert body[1]["expiresAt"].endswith("Z")
    assert body[0]["revokedAt"] is None
    text = response.content.decode()
    for token in two_tokens:
        assert token not in text
        assert bearer_tokens.digest(token) not in text
    event = AuditEvent.objects.order_by("-seq").first()
    assert (event.action, event.status, event.target) == ("agents.list_tokens", 200, "bot")


def test_revoking_one_token_refuses_it_at_once_and_keeps_the_other(alice_api, two_tokens):
    first, second = two_tokens
    assert read(first, "github").status_code == 404  # granted, nothing stored: it works
    response = revoke(alice_api, "bot", first[:12])
    assert response.status_code == 204
    assert response.content == b""
    assert read(first, "github").status_code == 401
    assert read(second, "github").status_code == 404
    assert listed(alice_api, "bot").json()[0]["revokedAt"].endswith("Z")
    assert AgentToken.objects.get(prefix=first[:12]).revoked_at is not None
    event = AuditEvent.objects.filter(action="agents.revoke_token").get()
    assert (event.outcome, event.status, event.target) == ("success", 204, "bot")
    assert revoke(alice_api, "bot", first[:12]).status_code == 204  # once revoked, unchanged


def test_an_unknown_prefix_is_404_token_not_found(alice_api, two_tokens):
    assert_problem(revoke(alice_api, "bot", "cva_00000000"), 404, "token_not_found")
    event = AuditEvent.objects.order_by("-seq").first()
    assert (event.action, event.outcome, event.status) == ("agents.revoke_token", "refused", 404)


def test_another_accounts_agent_and_tokens_are_not_found(alice_api, bob_api, two_tokens):
    assert_problem(listed(bob_api, "bot"), 404, "agent_not_found")
    assert_problem(revoke(bob_api, "bot", two_tokens[0][:12]), 404, "agent_not_found")
    assert put_agent(bob_api, "bot", []).status_code == 201
    assert listed(bob_api, "bot").json() == []
    assert_problem(revoke(bob_api, "bot", two_tokens[0][:12]), 404, "token_not_found")
    assert read(two_tokens[0], "github").status_code == 404  # alice's token still works


def test_an_agent_token_cannot_manage_tokens(alice_api, two_tokens):
    response = alice_api.client.get(
        "/api/v1/agents/bot/tokens", headers={"Authorization": f"Bearer {two_tokens[0]}"}
    )
    assert_problem(response, 403, "insufficient_scope")
