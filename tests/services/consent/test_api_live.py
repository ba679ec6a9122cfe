"""The consent of a brokered call end to end, under gunicorn, with `requests` as an agent and
a person's client would send them: asked, pending (Retry-After), approved through the account
API, and then two racing repeats of the same request make exactly one call to the provider."""

from __future__ import annotations

import json
import threading

import pytest
import requests

from services.models import Approval, AuditEvent, Grant
from tests.support.harness import Gunicorn, server_env
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    database_url,
    marked,
    put_agent,
)

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_allowed_once_two_racing_repeats_make_one_call(
    alice_api, alice_account_and_token, provider_server, settings
):
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    token = agent_token(alice_api, "bot")
    provider_server.answer(201, {"id": 1})
    env = server_env(
        database_url(),
        CREDVAULT_ENCRYPTION_KEYS=settings.CREDVAULT_ENCRYPTION_KEYS,
        CREDVAULT_AUDIT_KEYS=settings.CREDVAULT_AUDIT_KEYS,
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider_server.url}),
    )
    agent = {"Authorization": f"Bearer {token}"}
    person = {"Authorization": f"Bearer {alice_account_and_token[1]}"}
    with Gunicorn(env, workers=2) as server:
        target = f"{server.url}{PROXY_PREFIX}/github/repos/acme/app/issues"

        def repeat() -> requests.Response:
            return requests.post(target, data=b'{"title":"t"}', headers=agent, timeout=30)

        asked = repeat()
        assert (asked.status_code, asked.json()["code"]) == (403, "approval_required")
        approval_id = asked.json()["approvalId"]
        pending = repeat()
        assert (pending.status_code, pending.json()["code"]) == (403, "approval_pending")
        assert int(pending.headers["Retry-After"]) > 0
        assert provider_server.requests == []

        listed = requests.get(f"{server.url}/api/v1/approvals", headers=person, timeout=30)
        assert [a["id"] for a in listed.json()] == [approval_id]
        approved = requests.post(
            f"{server.url}/api/v1/approvals/{approval_id}/approve", headers=person, timeout=30
        )
        assert (approved.status_code, approved.json()["status"]) == (200, "approved")

        barrier = threading.Barrier(2)
        answers: list[requests.Response] = []

        def racer() -> None:
            barrier.wait()
            answers.append(repeat())

        racers = [threading.Thread(target=racer) for _ in range(2)]
        for thread in racers:
            thread.start()
        for thread in racers:
            thread.join(30)
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [201, 403]
    [refused] = [answer for answer in answers if answer.status_code == 403]
    assert refused.json()["code"].startswith("approval_")
    assert len(provider_server.requests) == 1
    assert Approval.objects.get(id=approval_id).used_at is not None
    assert AuditEvent.objects.filter(action="approval.used", target=approval_id).count() == 1
