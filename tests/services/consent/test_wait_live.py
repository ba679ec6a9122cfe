"""`Prefer: wait=N` under gunicorn: a decision made by another process (here the test's, as a
member's on another host or a command would be) wakes the calls its workers hold, through
each worker's waiting room polling the database."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.db import connection

from services.consent.decisions import Decider, approve_call, deny
from services.models import Approval, ApprovalStatus, Grant
from services.storage.backends.idle import LIMIT as IDLE_LIMIT
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


def _guarded(alice_api) -> str:
    """Alice's github set and agent `bot`, whose POSTs under /repos need an approval."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    return agent_token(alice_api, "bot")


def _socket_ports(worker: int) -> set[int]:
    """The local TCP ports of the worker's open sockets (its connections to PostgreSQL among
    them), from /proc: a backend of another process (the test's, an autovacuum worker's) is not
    the worker's."""
    inodes = set()
    for fd in Path(f"/proc/{worker}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{worker}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _database_connections(worker: int) -> int:
    """The worker's open connections to the test database: its open files of the SQLite
    database, or PostgreSQL's backends whose client is one of the worker's sockets."""
    if connection.vendor == "sqlite":
        name = settings.DATABASES["default"]["NAME"]
        links = []
        for fd in Path(f"/proc/{worker}/fd").iterdir():
            try:
                links.append(os.readlink(fd))
            except OSError:
                continue
        return links.count(str(name))
    ports = _socket_ports(worker)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT client_port FROM pg_stat_activity WHERE datname = current_database()"
        )
        return sum(1 for (port,) in cursor.fetchall() if port in ports)


@pytest.mark.django_db(transaction=True)
def test_fifty_held_calls_hold_no_database_connection(alice_api, alice, provider_server):
    """50 calls held in one worker: its open database connections stay within its pool of
    idle ones (which a held call gives its own back to), where a held connection each would
    be 50."""
    token = _guarded(alice_api)
    env = served_env(
        {"github": provider_server.url},
        CREDVAULT_APPROVAL_MAX_WAIT="60",
        CREDVAULT_PROXY_MAX_CONCURRENT="60",
    )
    decider = Decider(account_id=alice.pk, request_id="test", member="person@example.com")
    with Gunicorn(env, workers=1) as server, ThreadPoolExecutor(50) as pool:
        [worker] = server.worker_pids()
        asked = requests.post(
            f"{server.url}{PROXY_PREFIX}/github/repos/o/a/issues",
            data=b'{"t":1}',
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            timeout=30,
        )
        assert asked.status_code == 403
        held = [pool.submit(_held, server.url, token, "/repos/o/a/issues", 40) for _ in range(50)]
        # Every call asks, then waits: on a loaded machine some are still asking at first, each
        # with its connection, so the count is read until it settles (a held call's own
        # connection would keep it at 50 for the whole wait).
        settle = time.monotonic() + 20
        while (connections := _database_connections(worker)) > IDLE_LIMIT + 1:
            if time.monotonic() > settle:
                break
            time.sleep(0.25)
        assert [future.result()[0].content for future in held if future.done()] == []
        deny(decider=decider, approval_id=asked.json()["approvalId"])
        answers = [future.result(30)[0] for future in held]
    assert connections <= IDLE_LIMIT + 1
    assert {answer.json()["code"] for answer in answers} == {"approval_denied"}
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_decision_in_another_process_wakes_the_held_calls(alice_api, alice, provider_server):
    token = _guarded(alice_api)
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
