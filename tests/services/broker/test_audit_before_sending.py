"""A brokered call's audit event is written before its request leaves (outcome `sent`, with the
path as it is sent beside the agent's spelling), and completed once the call has ended, with a
completion signed outside the chained form. A worker killed while the provider holds the
request leaves the event behind, and the chain still verifies."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import urllib3
from django.core.management import call_command
from django.core.management.base import CommandError

from services import audit
from services.models import Account, AuditEvent
from tests.support.harness import Gunicorn, server_env
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    call,
    creds,
    database_url,
    marked,
    put_agent,
)


@pytest.fixture
def github(alice_api, provider_server):
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    return value, agent_token(alice_api, "bot")


def _proxy_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="agent.proxy").order_by("seq"))


def _verified(account_name: str = "alice") -> None:
    account = Account.objects.get(name=account_name)
    assert audit.verify_chain(account)[1] is None
    assert audit.verify_completions(account) is None
    call_command("verify_audit", account_name)


@pytest.mark.django_db
def test_a_call_is_one_event_with_the_path_as_sent_beside_the_agents(
    github, provider_server, alice_api, caplog
):
    """The agent writes `%2f` in lower case: the provider receives `%2F`, and the event holds
    both spellings; the completion holds the provider's status and verifies."""
    _, token = github
    provider_server.answer(200, {"ok": True})
    target = f"{PROXY_PREFIX}/github/repos/acme%2fwidgets/issues?page=2"
    response = call(
        token, "GET", "github", "/repos/acme/widgets/issues", query="page=2", raw=target
    )
    assert response.status_code == 200
    assert provider_server.requests[-1].path == "/repos/acme%2Fwidgets/issues?page=2"
    [event] = _proxy_events()
    assert (event.path, event.sent_path) == (
        "/repos/acme%2fwidgets/issues",
        "/repos/acme%2Fwidgets/issues",
    )
    assert (event.outcome, event.status, event.upstream_status) == ("success", 200, 200)
    assert event.completion_mac.startswith("audit-")
    # The completion's own line on the credvault.audit logger, beside the event's.
    [line] = [r.getMessage() for r in caplog.records if "audit_completion" in r.getMessage()]
    assert json.loads(line) == {
        "type": "audit_completion",
        "account": event.account_id,
        "seq": event.seq,
        "digest": event.digest,
        "outcome": "success",
        "status": 200,
        "upstream_status": 200,
        "mac": event.completion_mac,
    }
    listed = alice_api.raw("GET", "/api/v1/audit-events?limit=2").json()["events"]
    [shown] = [item for item in listed if item["action"] == "agent.proxy"]
    assert (shown["path"], shown["sentPath"]) == (
        "/repos/acme%2fwidgets/issues",
        "/repos/acme%2Fwidgets/issues",
    )
    assert (shown["outcome"], shown["status"], shown["upstreamStatus"]) == ("success", 200, 200)
    _verified()


@pytest.mark.django_db
def test_a_credential_in_the_path_is_redacted_from_the_path_as_sent(
    alice_api, provider_server, caplog
):
    """Telegram's token goes in the path (`/bot{token}/...`): the event holds the path the
    provider received with the token replaced, never the token."""
    value = f"123456:{marked('tg')}"
    assert alice_api.store("telegram", creds(bot_token=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["telegram"]).status_code == 201
    token = agent_token(alice_api, "bot")
    provider_server.answer(200, {"ok": True})
    assert call(token, "GET", "telegram", "/getMe").status_code == 200
    assert provider_server.requests[-1].path == f"/bot{value}/getMe"
    [event] = _proxy_events()
    assert (event.path, event.sent_path) == ("/getMe", "/bot[REDACTED]/getMe")
    stored = json.dumps(list(AuditEvent.objects.values()), default=str)
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert value not in stored
    assert value.split(":")[1] not in stored
    assert value.split(":")[1] not in logged
    _verified()


@pytest.mark.django_db
def test_a_call_that_fails_once_sent_is_one_event_completed_with_the_failure(
    github, provider_server, settings
):
    """The provider never answers: 504, and the event written before sending is completed
    with it (no second event from the view)."""
    _, token = github
    settings.CREDVAULT_PROXY_TIMEOUT = 0.5
    provider_server.answer(200, {"ok": True}, hang=True)
    response = call(token, "GET", "github", "/user")
    assert response.status_code == 504
    assert response["X-Credvault-Error"] == "upstream_timeout"
    [event] = _proxy_events()
    assert (event.outcome, event.status, event.upstream_status) == ("error", 504, None)
    assert (event.path, event.sent_path) == ("/user", "/user")
    _verified()


@pytest.mark.django_db
def test_a_refused_call_was_never_sent_and_has_no_path_as_sent(github, provider_server):
    _, token = github
    response = call(token, "GET", "stripe", "/v1/charges")
    assert response.status_code == 403
    assert response.json()["code"] == "not_granted"
    [event] = _proxy_events()
    assert (event.outcome, event.status, event.sent_path) == ("refused", 403, "")
    assert "sent_path" not in audit.canonical(event)
    assert provider_server.requests == []
    _verified()


@pytest.mark.django_db
def test_an_altered_completion_fails_verification_but_not_the_chain(github, provider_server):
    """The completion is outside the chained form: changing it leaves the chain intact, and
    its MAC (CREDVAULT_AUDIT_KEYS, outside the database) names it; changing what the event
    chained (its path as sent) breaks the chain."""
    _, token = github
    provider_server.answer(404, {"message": "Not Found"})
    assert call(token, "GET", "github", "/repos/o/missing").status_code == 404
    [event] = _proxy_events()
    account = Account.objects.get(name="alice")
    AuditEvent.objects.filter(pk=event.pk).update(outcome="refused", status=403)
    assert audit.verify_chain(account)[1] is None
    broken = audit.verify_completions(account)
    assert broken is not None
    assert broken.seq == event.seq
    assert "completion does not verify" in broken.reason
    with pytest.raises(CommandError, match="broken chain"):
        call_command("verify_audit", "alice")
    AuditEvent.objects.filter(pk=event.pk).update(outcome="success", status=404)
    assert audit.verify_completions(account) is None
    AuditEvent.objects.filter(pk=event.pk).update(sent_path="/somewhere/else")
    assert audit.verify_chain(account)[1].reason == "the row was edited"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_while_the_provider_holds_the_call_leaves_its_event(
    alice_api, provider_server, settings
):
    """gunicorn's worker is SIGKILLed while the stand-in holds the request: the event written
    before the request left is there (outcome `sent`, no status), and the chain verifies."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    token = agent_token(alice_api, "bot")
    provider_server.answer(200, {"ok": True}, hang=True)
    env = server_env(
        database_url(),
        CREDVAULT_ENCRYPTION_KEYS=settings.CREDVAULT_ENCRYPTION_KEYS,
        CREDVAULT_AUDIT_KEYS=settings.CREDVAULT_AUDIT_KEYS,
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider_server.url}),
    )
    with Gunicorn(env, workers=1) as server:
        [worker] = server.worker_pids()
        pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=5, read=30))
        before = len(provider_server.requests)
        answered: list[object] = []

        def agent() -> None:
            try:
                answered.append(
                    pool.request(
                        "GET",
                        f"{server.url}{PROXY_PREFIX}/github/user/repos",
                        headers={"Authorization": f"Bearer {token}"},
                    ).status
                )
            except urllib3.exceptions.HTTPError as exc:
                answered.append(exc)

        thread = threading.Thread(target=agent)
        thread.start()
        deadline = time.monotonic() + 15
        while len(provider_server.requests) == before:
            assert time.monotonic() < deadline, "the call never reached the provider"
            time.sleep(0.02)
        os.kill(worker, signal.SIGKILL)
        thread.join(20)
        [outcome] = answered
        assert isinstance(outcome, urllib3.exceptions.HTTPError), "the agent got an answer"
    [event] = _proxy_events()
    assert (event.method, event.path, event.sent_path) == ("GET", "/user/repos", "/user/repos")
    assert (event.outcome, event.status, event.upstream_status) == ("sent", 0, None)
    assert event.completion_mac == ""
    listed = alice_api.raw("GET", f"/api/v1/audit-events?limit=1&before={event.seq + 1}")
    [shown] = listed.json()["events"]
    assert (shown["outcome"], shown["status"], shown["sentPath"]) == ("sent", None, "/user/repos")
    _verified()
