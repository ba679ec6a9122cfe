"""Agents, grants, agent tokens and the agent credential read."""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.test import Client
from django.utils import timezone

from services import audit, bearer_tokens
from services.grants import Given, GrantSpec, given_in_list
from services.models import Agent, AgentToken, AuditEvent, Grant
from services.rates import parse_rate
from tests.support.helpers import (
    Api,
    agent_token,
    assert_problem,
    audit_record_queries,
    creds,
    marked,
    put_agent,
    read,
)

AGENT_TOKEN = re.compile(r"cva_[0-9A-Za-z]{46}")
SCOPE = 'Bearer realm="credvault", error="insufficient_scope"'


def granted(services: list[dict]) -> list[str]:
    """The services of an agent's grants, as a response lists them."""
    return [grant["service"] for grant in services]


@pytest.fixture
def reader(alice_api):
    """Alice's agent `reader`, granted github and custom, with a fresh token."""
    assert put_agent(alice_api, "reader", ["github", "custom"]).status_code == 201
    return agent_token(alice_api, "reader")


@pytest.mark.django_db
class TestManagingAgents:
    def test_create_list_replace_and_delete(self, alice_api, alice):
        assert alice_api.client.get("/api/v1/agents", headers=alice_api.headers()).json() == []
        response = put_agent(alice_api, "Report Bot", [" GitHub ", "slack", "github"], access=None)
        assert response.status_code == 201
        body = response.json()
        assert set(body) == {"name", "createdAt", "services"}
        assert (body["name"], granted(body["services"])) == ("report-bot", ["github", "slack"])
        # A service named by a string gets the default grant: brokered calls, every method
        # and path, no sensitive GraphQL mutation.
        assert body["services"][0] == {
            "service": "github",
            "access": "proxy",
            "methods": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
            "paths": ["/"],
            "graphql": [],
        }
        replaced = put_agent(alice_api, "report-bot", ["openai"])
        assert replaced.status_code == 200
        assert granted(replaced.json()["services"]) == ["openai"]
        assert replaced.json()["createdAt"] == body["createdAt"]
        assert list(Grant.objects.values_list("service", flat=True)) == ["openai"]
        put_agent(alice_api, "another", [])
        listed = alice_api.client.get("/api/v1/agents", headers=alice_api.headers()).json()
        assert [(a["name"], granted(a["services"])) for a in listed] == [
            ("another", []),
            ("report-bot", ["openai"]),
        ]
        response = alice_api.client.delete("/api/v1/agents/report-bot", headers=alice_api.headers())
        assert response.status_code == 204
        assert not Agent.objects.filter(name="report-bot").exists()
        assert not Grant.objects.exists()

    def test_unknown_agent_is_404(self, alice_api):
        response = alice_api.client.delete("/api/v1/agents/nobody", headers=alice_api.headers())
        assert_problem(response, 404, "agent_not_found")
        response = alice_api.raw("POST", "/api/v1/agents/nobody/tokens", b"")
        assert_problem(response, 404, "agent_not_found")

    @pytest.mark.parametrize(
        ("name", "body", "field"),
        [
            ("bad%21name", {"services": []}, "name"),
            ("-leading", {"services": []}, "name"),
            ("bot", {"services": ["../etc"]}, "services[0]"),
            ("bot", {"services": [1]}, "services[0]"),
            ("bot", {"services": "github"}, "services"),
            ("bot", {"services": [], "url": "http://x"}, "url"),
            ("bot", {}, "services"),
            ("bot", {"services": [f"s{i}" for i in range(101)]}, "services"),
        ],
    )
    def test_bad_agent_input_is_400_and_changes_nothing(self, alice_api, name, body, field):
        response = alice_api.raw("PUT", f"/api/v1/agents/{name}", json.dumps(body))
        problem = assert_problem(response, 400, "invalid_request")
        assert field in {error["field"] for error in problem["errors"]}
        assert not Agent.objects.exists()

    def test_agents_are_per_account(self, alice_api, bob_api):
        put_agent(alice_api, "bot", ["github"])
        assert bob_api.client.get("/api/v1/agents", headers=bob_api.headers()).json() == []
        response = bob_api.client.delete("/api/v1/agents/bot", headers=bob_api.headers())
        assert_problem(response, 404, "agent_not_found")
        assert put_agent(bob_api, "bot", []).status_code == 201


@pytest.mark.django_db
class TestAgentTokens:
    def test_issued_once_and_stored_as_a_digest(self, alice_api, alice):
        put_agent(alice_api, "bot", [])
        response = alice_api.raw("POST", "/api/v1/agents/bot/tokens", b"")
        assert response.status_code == 201
        body = response.json()
        assert set(body) == {"token", "prefix", "expiresAt"}
        assert AGENT_TOKEN.fullmatch(body["token"])
        assert bearer_tokens.is_well_formed(body["token"], bearer_tokens.AGENT_KIND)
        assert body["prefix"] == body["token"][:12]
        assert body["expiresAt"] is None
        row = AgentToken.objects.values().get()
        assert body["token"] not in str(row)
        assert row["digest"] == bearer_tokens.digest(body["token"])

    def test_expiry_in_days(self, alice_api):
        put_agent(alice_api, "bot", [])
        response = alice_api.raw(
            "POST", "/api/v1/agents/bot/tokens", json.dumps({"expiresInDays": 30})
        )
        token = AgentToken.objects.get()
        assert response.json()["expiresAt"].endswith("Z")
        assert abs((token.expires_at - timezone.now()) - timedelta(days=30)) < timedelta(minutes=1)

    @pytest.mark.parametrize(
        "body", [{"expiresInDays": 0}, {"expiresInDays": "7"}, {"expiresInDays": True}, {"x": 1}]
    )
    def test_bad_token_requests_are_400(self, alice_api, body):
        put_agent(alice_api, "bot", [])
        response = alice_api.raw("POST", "/api/v1/agents/bot/tokens", json.dumps(body))
        assert_problem(response, 400, "invalid_request")
        assert not AgentToken.objects.exists()


@pytest.mark.django_db
class TestAgentRead:
    def test_reads_a_granted_set_byte_exact(self, alice_api, reader):
        pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQ\u00e9\n-----END PRIVATE KEY-----\n"
        stored = alice_api.store("custom", creds(private_key=pem, client_id=" id with spaces "))
        response = read(reader, "custom")
        assert response.status_code == 200
        assert response["Cache-Control"] == "no-store"
        assert response.json() == {
            "service": "custom",
            "keyType": "api_key",
            "connectedAt": stored.json()["connectedAt"],
            "credentials": [
                {"keyName": "client_id", "value": " id with spaces "},
                {"keyName": "private_key", "value": pem},
            ],
        }

    def test_a_service_without_a_grant_is_403(self, alice_api, reader):
        alice_api.store("slack", creds(api_key="xoxb"))
        assert_problem(read(reader, "slack"), 403, "not_granted")

    def test_a_granted_service_not_connected_is_404(self, reader):
        assert_problem(read(reader, "github"), 404, "service_not_connected")

    def test_the_path_is_normalized(self, alice_api, reader):
        alice_api.store("github", creds(api_key="ghp"))
        assert read(reader, "%20GitHub%20").status_code == 200
        assert_problem(read(reader, "a%20b%2Fc"), 400, "invalid_service")

    def test_removing_the_service_ends_access_at_once(self, alice_api, reader):
        alice_api.store("github", creds(api_key="ghp"))
        assert read(reader, "github").status_code == 200
        assert alice_api.delete("github").status_code == 204
        assert_problem(read(reader, "github"), 404, "service_not_connected")

    def test_removing_the_grant_ends_access_at_once(self, alice_api, reader):
        alice_api.store("github", creds(api_key="ghp"))
        assert read(reader, "github").status_code == 200
        assert put_agent(alice_api, "reader", ["custom"]).status_code == 200
        assert_problem(read(reader, "github"), 403, "not_granted")

    def test_deleting_the_agent_ends_its_tokens_at_once(self, alice_api, reader):
        alice_api.store("github", creds(api_key="ghp"))
        alice_api.client.delete("/api/v1/agents/reader", headers=alice_api.headers())
        response = read(reader, "github")
        assert_problem(response, 401, "invalid_token")
        # A new agent of the same name does not revive the old tokens.
        put_agent(alice_api, "reader", ["github"])
        assert_problem(read(reader, "github"), 401, "invalid_token")

    def test_a_revoked_token_is_refused_at_once(self, alice_api, reader):
        from services.accounts import revoke_token

        alice_api.store("github", creds(api_key="ghp"))
        revoke_token(prefix=reader[:12])
        assert_problem(read(reader, "github"), 401, "invalid_token")

    def test_an_expired_token_and_an_inactive_account_are_refused(self, alice_api, alice, reader):
        alice_api.store("github", creds(api_key="ghp"))
        AgentToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        assert_problem(read(reader, "github"), 401, "invalid_token")
        AgentToken.objects.update(expires_at=None)
        alice.is_active = False
        alice.save()
        assert_problem(read(reader, "github"), 401, "invalid_token")

    def test_an_agent_reads_only_its_own_account(self, alice_api, bob_api, reader):
        bob_api.store("github", creds(api_key="bob-secret"))
        response = read(reader, "github")
        assert_problem(response, 404, "service_not_connected")
        assert b"bob-secret" not in response.content

    def test_a_malformed_agent_token_is_refused_without_a_query(self, django_assert_num_queries):
        with django_assert_num_queries(0):
            response = read("cva_" + "x" * 46, "github")
        assert_problem(response, 401, "invalid_token")

    def test_query_count_is_constant(
        self, alice_api, reader, django_assert_num_queries, cached_data_keys
    ):
        for fields in (1, 20):
            alice_api.store("custom", creds(**{f"field_{i}": "v" for i in range(fields)}))
            AgentToken.objects.update(last_used_at=timezone.now())
            cached_data_keys()
            with django_assert_num_queries(2 + audit_record_queries()):
                # 1. SELECT the agent token by digest, joined to its account
                # 2. SELECT the grant joined to its service and fields, in one statement
                # then the audit event (no transaction around the two)
                response = read(reader, "custom")
            assert len(response.json()["credentials"]) == fields

    def test_a_read_that_cannot_be_audited_answers_no_secret(self, alice_api, reader, monkeypatch):
        """The event is appended before the answer: when the append fails, nothing is read
        out, and no event claims a read."""
        secret = marked("audit-down")
        alice_api.store("github", creds(api_key=secret))
        before = AuditEvent.objects.count()

        def audit_down(*args, **kwargs):
            raise OperationalError("audit store down")

        monkeypatch.setattr(audit, "record", audit_down)
        response = read(reader, "github")
        assert_problem(response, 503, "service_unavailable")
        assert secret.encode() not in response.content
        assert AuditEvent.objects.count() == before


@pytest.mark.django_db
class TestScopes:
    def test_an_account_token_on_the_agent_api_is_insufficient_scope(self, alice_api):
        alice_api.store("github", creds(api_key="ghp"))
        response = read(alice_api.token, "github")
        assert_problem(response, 403, "insufficient_scope")
        assert response["WWW-Authenticate"] == SCOPE
        assert b"ghp" not in response.content

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("GET", "/api/v1/services"),
            ("PUT", "/api/v1/services/credentials"),
            ("POST", "/api/v1/services/test"),
            ("DELETE", "/api/v1/services/credentials/github"),
            ("GET", "/api/v1/agents"),
            ("PUT", "/api/v1/agents/reader"),
            ("GET", "/api/v1/audit-events"),
            ("GET", "/api/v1/providers"),
        ],
    )
    def test_an_agent_token_on_the_account_api_is_insufficient_scope(self, reader, method, path):
        body = json.dumps({"service": "x", "credentials": creds(api_key="v"), "services": []})
        response = Api(Client(), reader).raw(method, path, body)
        assert_problem(response, 403, "insufficient_scope")
        assert response["WWW-Authenticate"] == SCOPE

    def test_an_unknown_agent_token_on_the_account_api_is_invalid(self, db):
        fake = bearer_tokens.generate(bearer_tokens.AGENT_KIND).plaintext
        assert_problem(Api(Client(), fake).list(), 401, "invalid_token")


@pytest.mark.django_db(transaction=True)
def test_agent_reads_racing_stores_see_one_store_only(alice_account_and_token):
    """Writers replace one service's set again and again, each set marked throughout; readers
    read it meanwhile. Every read is one stored set, never a mix of two."""
    _, account_token = alice_account_and_token
    api = Api(Client(), account_token)
    assert put_agent(api, "racer", ["raced"]).status_code == 201
    token = agent_token(api, "racer")
    api.store("raced", creds(a="m0", b="m0", c="m0"))
    reads: list[dict] = []
    failures: list[object] = []
    barrier = threading.Barrier(6)

    def writer(number: int) -> None:
        try:
            client = Api(Client(raise_request_exception=False), account_token)
            barrier.wait(timeout=10)
            for round_number in range(8):
                marker = f"w{number}r{round_number}"
                response = client.store("raced", creds(a=marker, b=marker, c=marker))
                if response.status_code not in (200, 201):
                    failures.append(response.status_code)
        finally:
            connection.close()

    def reader_thread() -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(12):
                response = read(token, "raced")
                if response.status_code != 200:
                    failures.append(response.status_code)
                    continue
                reads.append({c["keyName"]: c["value"] for c in response.json()["credentials"]})
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=reader_thread) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert len(reads) == 36
    for values in reads:
        assert set(values) == {"a", "b", "c"}
        assert len(set(values.values())) == 1, values


@pytest.mark.django_db
def test_agent_values_are_never_logged(alice_api, reader, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    secret = marked("agent")
    alice_api.store("custom", creds(api_key=secret))
    response = read(reader, "custom")
    assert secret in response.content.decode()
    assert secret not in caplog.text
    assert reader not in caplog.text


@pytest.mark.django_db
def test_account_and_agent_tokens_have_separate_rate_limits(alice_api, settings):
    """The two kinds of token are numbered in separate tables: a shared counter would let one
    exhaust the other's limit."""
    from django.core.cache import cache

    from services.models import ApiToken

    put_agent(alice_api, "bot", ["github"])
    token = agent_token(alice_api, "bot")
    account_pk = ApiToken.objects.get(prefix=alice_api.token[:12]).pk
    # The same primary key in both tables, as separate sequences easily give.
    AgentToken.objects.filter(prefix=token[:12]).update(id=account_pk)
    cache.clear()
    settings.CREDVAULT_RATE_LIMIT = parse_rate("2/min")
    assert_problem(read(token, "github"), 404, "service_not_connected")
    assert_problem(read(token, "github"), 404, "service_not_connected")
    assert_problem(read(token, "github"), 429, "rate_limited")
    assert alice_api.list().status_code == 200
    assert alice_api.list().status_code == 200
    assert_problem(alice_api.list(), 429, "rate_limited")


@pytest.mark.django_db
@pytest.mark.parametrize("paths", [[0], [False], [None], [["/x"]], [{"a": 1}]])
def test_a_grant_whose_paths_are_not_strings_is_a_400(alice_api, paths):
    """Found by the fuzzer: the shape is refused before any grant is made of it."""
    body = json.dumps({"services": [{"service": "github", "paths": paths}]})
    response = alice_api.raw("PUT", "/api/v1/agents/bot", body)
    problem = assert_problem(response, 400, "invalid_request")
    assert problem["errors"][0]["field"].startswith("services[0].paths")


def test_grants_given_as_a_list_are_named_by_their_place():
    github, slack = GrantSpec("github"), GrantSpec("slack", access="read")
    assert given_in_list([github, slack]) == [
        Given(github, "services[0]"),
        Given(slack, "services[1]"),
    ]


@pytest.mark.django_db
def test_put_agent_normalizes_and_checks_its_own_input(alice):
    """The business function, called directly (not through a view or a command), normalizes
    the agent's name and its grants' services, and refuses a name that does not normalize."""
    from services import agents
    from services.audit import Actor
    from services.exceptions import InvalidAgentName, InvalidIdentifier
    from services.grants import GrantSpec, given_in_list

    actor = Actor.command(alice.pk)
    grants = given_in_list([GrantSpec("GitHub")])
    put = agents.put_agent(actor=actor, name="  Report_Bot ", services=grants)
    assert (put.agent.name, [grant.service for grant in put.agent.services]) == (
        "report-bot",
        ["github"],
    )
    assert list(Agent.objects.filter(account=alice).values_list("name", flat=True)) == [
        "report-bot"
    ]
    assert agents.delete_agent(actor=actor, name="REPORT-BOT").status == 204
    with pytest.raises(InvalidAgentName) as refused:
        agents.put_agent(actor=actor, name="../etc", services=[])
    assert isinstance(refused.value, InvalidIdentifier)
    assert (refused.value.status_code, refused.value.default_code, refused.value.errors) == (
        400,
        "invalid_request",
        [{"field": "name", "code": "invalid", "message": refused.value.errors[0]["message"]}],
    )
    assert not Agent.objects.filter(account=alice).exists()
