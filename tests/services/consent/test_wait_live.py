"""`Prefer: wait=N` under gunicorn: a decision made by another process (here the test's, as a
member's on another host or a command would be) wakes the calls its workers hold, through
each worker's waiting room polling the database."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from services.consent.decisions import Decider, approve_call, deny
from services.models import Approval, ApprovalStatus, Grant
from tests.support.harness import Gunicorn
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    marked,
    put_agent,
    served_env,
)

pytestmark = pytest.mark.slow


def _held(url: str, token: str, path: str, wait: int) -> tuple[requests.Response, float]:
    started = time.monotonic()
    answer = requests.post(
        f"{url}{PROXY_PREFIX}/github{path}",
        data=b'{"t":1}',
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Prefer": f"wait={wait}",
        },
        timeout=60,
    )
    return answer, time.monotonic() - started


def _until_pending(count: int) -> list[Approval]:
    deadline = time.monotonic() + 20
    while True:
        pending = list(Approval.objects.filter(status=ApprovalStatus.PENDING).order_by("path"))
        if len(pending) == count:
            return pending
        assert time.monotonic() < deadline, "the calls never asked"
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_a_decision_in_another_process_wakes_the_held_calls(alice_api, alice, provider_server):
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    token = agent_token(alice_api, "bot")
    provider_server.answer(201, {"id": 1})
    env = served_env({"github": provider_server.url}, CREDVAULT_APPROVAL_MAX_WAIT="60")
    decider = Decider(account_id=alice.pk, request_id="test", member="person@example.com")
    with Gunicorn(env, workers=2) as server, ThreadPoolExecutor(4) as pool:
        allowed = pool.submit(_held, server.url, token, "/repos/o/a/issues", 40)
        denied = pool.submit(_held, server.url, token, "/repos/o/b/issues", 40)
        first, second = _until_pending(2)
        time.sleep(0.5)  # both held, not merely asked
        assert provider_server.requests == []
        decided = time.monotonic()
        approve_call(decider=decider, approval_id=first.id)
        deny(decider=decider, approval_id=second.id)
        answer, took = allowed.result(30)
        woken = time.monotonic() - decided
        assert answer.status_code == 201, answer.content
        assert answer.headers["Preference-Applied"] == "wait=40"
        assert took < 20
        assert woken < 3
        refused, _ = denied.result(30)
        assert refused.status_code == 403
        assert refused.json()["code"] == "approval_denied"
        assert refused.headers["Preference-Applied"] == "wait=40"
    [sent] = provider_server.requests
    assert sent.path == "/repos/o/a/issues"
    assert "prefer" not in {name.lower() for name in sent.headers}
