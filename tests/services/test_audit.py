"""Audit events: one per request with a known actor, never a secret, hash-chained per account,
written with the change they describe, and listed with a stable cursor."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from services import audit
from services.models import Account, AuditEvent, ConnectedService
from services.rates import parse_rate
from tests.support.helpers import Api, agent_token, assert_problem, creds, marked, put_agent, read

pytestmark = pytest.mark.django_db

# The fixtures issue each account's token with `issue_token`, an audited operator action: it is
# every account's first event (seq 1), before anything a test does.
ISSUED = 1


def issued(api: Api) -> tuple:
    return ("tokens.issue", "success", 201, "", api.token[:12], "")


def events(account: Account) -> list[tuple]:
    return list(
        AuditEvent.objects.filter(account=account)
        .order_by("seq")
        .values_list("action", "outcome", "status", "service", "target", "agent_name")
    )


def test_one_event_per_operation_with_its_outcome(alice_api, alice, settings):
    settings.CREDVAULT_RATE_LIMIT = parse_rate("20/min")
    alice_api.list()
    alice_api.store("github", creds(api_key="a"))
    alice_api.store("github", creds(api_key="b"))
    alice_api.test("custom", creds(api_key="c"))
    alice_api.raw("PUT", "/api/v1/services/credentials", b"{")
    alice_api.delete("github")
    alice_api.delete("github")
    alice_api.client.get("/api/v1/providers", headers=alice_api.headers())
    put_agent(alice_api, "bot", ["slack"])
    token = agent_token(alice_api, "bot")
    read(token, "slack")
    read(token, "github")
    alice_api.store("slack", creds(api_key="s"))
    read(token, "slack")
    read(alice_api.token, "slack")
    alice_api.client.delete("/api/v1/agents/bot", headers=alice_api.headers())
    read(token, "slack")
    alice_api.client.get("/api/v1/audit-events", headers=alice_api.headers())
    assert events(alice) == [
        issued(alice_api),
        ("services.list", "success", 200, "", "", ""),
        ("services.store", "success", 201, "github", "", ""),
        ("services.store", "success", 200, "github", "", ""),
        ("services.test", "success", 200, "custom", "", ""),
        ("services.store", "refused", 400, "", "", ""),
        ("services.remove", "success", 204, "github", "", ""),
        ("services.remove", "refused", 404, "github", "", ""),
        ("providers.list", "success", 200, "", "", ""),
        ("agents.put", "success", 201, "", "bot", ""),
        ("agents.issue_token", "success", 201, "", "bot", ""),
        ("agent.read_credentials", "refused", 404, "slack", "", "bot"),
        ("agent.read_credentials", "refused", 403, "github", "", "bot"),
        ("services.store", "success", 201, "slack", "", ""),
        ("agent.read_credentials", "success", 200, "slack", "", "bot"),
        ("agent.read_credentials", "refused", 403, "slack", "", ""),  # an account token there
        ("agents.delete", "success", 204, "", "bot", ""),
        ("agent.read_credentials", "refused", 401, "slack", "", "bot"),  # the path's service
        ("audit.list", "success", 200, "", "", ""),
    ]


def test_a_rate_limited_request_is_audited_as_refused(alice_api, alice, settings):
    settings.CREDVAULT_RATE_LIMIT = parse_rate("1/min")
    alice_api.list()
    assert alice_api.list().status_code == 429
    assert events(alice)[-1][:3] == ("services.list", "refused", 429)


def test_an_event_holds_who_what_and_the_request_id(alice_api, alice):
    response = alice_api.store("github", creds(api_key="v"))
    event = AuditEvent.objects.get(account=alice, action="services.store")
    assert event.token_prefix == alice_api.token[:12]
    assert event.request_id == response["X-Request-ID"]
    assert event.seq == ISSUED + 1
    assert event.prev_digest == AuditEvent.objects.get(account=alice, seq=ISSUED).digest
    listed = alice_api.client.get("/api/v1/audit-events", headers=alice_api.headers()).json()
    assert listed["events"][-2] == {
        "seq": ISSUED + 1,
        "time": listed["events"][-2]["time"],
        "tokenPrefix": alice_api.token[:12],
        "agent": None,
        "action": "services.store",
        "service": "github",
        "target": None,
        "outcome": "success",
        "status": 201,
        "requestId": response["X-Request-ID"],
        # A brokered call's members, null for every other event.
        "method": None,
        "path": None,
        "upstreamStatus": None,
        # A call made through the MCP server's call_api: "mcp".
        "via": None,
        # A brokered call's path as it was sent to the provider.
        "sentPath": None,
    }


def test_anonymous_and_unknown_tokens_reach_no_account(alice, anonymous_api):
    before = AuditEvent.objects.count()
    anonymous_api.list()
    Api(Client(), "cvt_" + "A" * 46).list()
    assert AuditEvent.objects.count() == before


def test_accounts_have_their_own_chains(alice_api, bob_api, alice, bob):
    alice_api.list()
    bob_api.list()
    bob_api.list()
    assert sorted(e.seq for e in AuditEvent.objects.filter(account=alice)) == [1, 2]
    assert sorted(e.seq for e in AuditEvent.objects.filter(account=bob)) == [1, 2, 3]
    assert (
        bob_api.client.get("/api/v1/audit-events", headers=bob_api.headers()).json()["events"][-2][
            "tokenPrefix"
        ]
        == bob_api.token[:12]
    )


def test_no_secret_or_token_in_any_event(alice_api, alice):
    secret = marked("audit")
    alice_api.store("custom", creds(api_key=secret))
    alice_api.raw("PUT", "/api/v1/services/credentials", json.dumps({"x": secret}))
    put_agent(alice_api, "bot", ["custom"])
    token = agent_token(alice_api, "bot")
    read(token, "custom")
    dump = json.dumps(list(AuditEvent.objects.values()), default=str)
    page = alice_api.client.get("/api/v1/audit-events", headers=alice_api.headers()).content
    for text in (dump, page.decode()):
        assert secret not in text
        assert alice_api.token not in text
        assert token not in text


def test_the_event_is_written_with_its_change(alice_api, alice, monkeypatch):
    """An audit write that fails undoes the change it describes."""
    real = audit.record
    calls = {"n": 0}

    def failing_first(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("audit store down")
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "record", failing_first)
    assert_problem(alice_api.store("github", creds(api_key="v")), 500, "internal_error")
    assert not ConnectedService.objects.exists()
    assert events(alice) == [issued(alice_api), ("services.store", "error", 500, "github", "", "")]


class TestVerifyAudit:
    @pytest.fixture
    def chain(self, alice_api, alice):
        for index in range(5):
            alice_api.store(f"svc-{index}", creds(api_key="v"))
        return list(AuditEvent.objects.filter(account=alice).order_by("seq"))

    def _verify(self, *args: str) -> tuple[str, str]:
        out, err = StringIO(), StringIO()
        call_command("verify_audit", *args, stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    def test_an_untouched_chain_verifies(self, chain, bob_api):
        bob_api.list()
        out, _ = self._verify()
        assert f"account alice: {ISSUED + 5} events, chain intact" in out
        assert f"head {Account.objects.get(name='alice').audit_head}" in out
        assert f"account bob: {ISSUED + 1} events, chain intact" in out

    def _broken(self, *args: str) -> str:
        err = StringIO()
        with pytest.raises(CommandError, match="broken chain"):
            call_command("verify_audit", *args, stdout=StringIO(), stderr=err)
        return err.getvalue()

    def test_an_edited_row_is_named(self, chain):
        AuditEvent.objects.filter(pk=chain[2].pk).update(status=204)
        assert f"broken at seq 3 (event id {chain[2].pk}): the row was edited" in self._broken(
            "alice"
        )

    def test_a_deleted_row_is_named(self, chain):
        AuditEvent.objects.filter(pk=chain[1].pk).delete()
        message = self._broken("alice")
        assert f"broken at seq 3 (event id {chain[2].pk})" in message
        assert "deleted or reordered" in message

    def test_a_reordering_is_named(self, chain):
        first, second = chain[1], chain[2]
        AuditEvent.objects.filter(pk=first.pk).update(seq=1000)
        AuditEvent.objects.filter(pk=second.pk).update(seq=first.seq)
        AuditEvent.objects.filter(pk=first.pk).update(seq=second.seq)
        assert f"broken at seq 2 (event id {second.pk})" in self._broken("alice")

    def test_a_row_cut_from_the_end_is_detected(self, chain):
        AuditEvent.objects.filter(pk=chain[-1].pk).delete()
        last = ISSUED + 5
        assert f"broken at seq {last} (the chain's head): the head records seq {last}" in (
            self._broken()
        )

    def test_an_unknown_account_is_an_error(self, db):
        with pytest.raises(CommandError, match="no account named"):
            call_command("verify_audit", "nobody", stdout=StringIO())


class TestListing:
    def test_pages_are_stable_while_events_are_written(self, alice_api, alice):
        for index in range(7):
            alice_api.store(f"svc-{index}", creds(api_key="v"))

        def page(**query: str) -> dict:
            response = alice_api.client.get(
                "/api/v1/audit-events", query, headers=alice_api.headers()
            )
            assert response.status_code == 200
            return response.json()

        first = page(limit="3")
        assert [e["seq"] for e in first["events"]] == [8, 7, 6]
        for index in range(4):  # new events while the client pages
            alice_api.store(f"later-{index}", creds(api_key="v"))
        second = page(limit="3", before=first["next"])
        third = page(limit="3", before=second["next"])
        assert [e["seq"] for e in second["events"]] == [5, 4, 3]
        assert [e["seq"] for e in third["events"]] == [2, 1]  # the fixture's token at seq 1
        assert third["next"] is None

    @pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "201"}, {"before": "x"}])
    def test_bad_parameters_are_400(self, alice_api, query):
        response = alice_api.client.get("/api/v1/audit-events", query, headers=alice_api.headers())
        assert_problem(response, 400, "invalid_request")


@pytest.mark.django_db(transaction=True)
def test_racing_reads_and_changes_keep_one_unbroken_chain(alice_account_and_token):
    """Six clients list and store at once. On PostgreSQL a read's event is one statement
    that locks the head itself, beside changes that lock it first: every event gets its own
    seq and the chain verifies."""
    import threading

    from django.db import connection

    account, token = alice_account_and_token
    failures: list[str] = []

    def client(index: int) -> None:
        api = Api(Client(), token)
        try:
            for round_number in range(15):
                if index % 2:
                    response = api.store(f"svc-{index}", creds(api_key=f"v{round_number}"))
                else:
                    response = api.list()
                if response.status_code not in (200, 201):
                    failures.append(f"{response.status_code} {response.content[:200]!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    account.refresh_from_db()
    count, broken = audit.verify_chain(account)
    assert broken is None, str(broken)
    assert count == ISSUED + 6 * 15 == account.audit_seq
    seqs = list(AuditEvent.objects.filter(account=account).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, ISSUED + 91))
