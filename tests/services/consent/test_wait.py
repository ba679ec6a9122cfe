"""`Prefer: wait=N`: a call that needs a decision is held until a member decides or N seconds
pass, then answered as the gate says, with `Preference-Applied`; the held call gives its
database connection back and keeps its place among the token's calls in flight. The calls are
held in threads of the test process while the test decides (in this process: the waiters are
woken at once; by a direct write to the database, as another process decides: the poller
wakes them)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone

from credvault.configuration import SETTINGS
from services.consent import waiting
from services.consent.decisions import Decider, approve_call, deny
from services.consent.waiting import WaitingRoom, read_wait
from services.models import Approval, ApprovalStatus, AuditEvent, Grant
from tests.support.helpers import agent_token, assert_problem, call, creds, marked, put_agent

ISSUES = "/repos/o/r/issues"


@pytest.fixture
def guarded(alice_api, provider_server):
    """Alice's github set and agent `bot`, whose POSTs under /repos need an approval."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    return agent_token(alice_api, "bot")


@pytest.fixture(autouse=True)
def room(monkeypatch) -> WaitingRoom:
    """A waiting room of the test's own, polling often."""
    fresh = WaitingRoom(poll_seconds=0.1)
    monkeypatch.setattr(waiting, "ROOM", fresh)
    return fresh


@pytest.fixture
def held() -> Iterator[Callable[..., Future[Any]]]:
    """Runs a call in a thread of its own (its connections closed at its end)."""
    with ThreadPoolExecutor(max_workers=8) as pool:

        def start(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
            def run() -> Any:
                try:
                    return function(*args, **kwargs)
                finally:
                    connections.close_all()

            return pool.submit(run)

        yield start


def until(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def decider(alice) -> Decider:
    return Decider(account_id=alice.pk, request_id="test", member="person@example.com")


def post(token: str, prefer: str = "wait=10", path: str = ISSUES):
    headers = {"Prefer": prefer} if prefer else {}
    return call(token, "POST", "github", path, body=b'{"t":1}', headers=headers)


def sent_prefer(recorded) -> str | None:
    """The Prefer header the provider received, if any."""
    return {name.lower(): value for name, value in recorded.headers.items()}.get("prefer")


def timed(function: Callable[[], Any]) -> Callable[[], tuple[Any, float]]:
    def run() -> tuple[Any, float]:
        started = time.monotonic()
        return function(), time.monotonic() - started

    return run


@pytest.mark.django_db(transaction=True)
class TestHeldUntilDecided:
    def test_held_then_allowed_goes_through_at_once(
        self, guarded, provider_server, alice, held, monkeypatch
    ):
        """Decided in this process: the waiter wakes at once, not at the next poll."""
        monkeypatch.setattr(waiting, "ROOM", WaitingRoom(poll_seconds=60))
        provider_server.answer(201, {"id": 1})
        future = held(timed(lambda: post(guarded, "respond-async, WAIT=10; x=y, handling=lenient")))
        until(lambda: waiting.ROOM.waiting() == 1)
        assert provider_server.requests == []
        decided_at = time.monotonic()
        approve_call(decider=decider(alice), approval_id=Approval.objects.get().id)
        answer, _ = future.result(10)
        assert time.monotonic() - decided_at < 1
        assert answer.status_code == 201
        assert answer["Preference-Applied"] == "wait=10"
        [sent] = provider_server.requests
        assert sent_prefer(sent) == "respond-async, handling=lenient"
        actions = list(AuditEvent.objects.values_list("action", flat=True))
        for action in ("approval.requested", "approval.approved", "approval.used"):
            assert action in actions
        assert AuditEvent.objects.get(action="agent.proxy").target == Approval.objects.get().id

    def test_held_then_denied(self, guarded, provider_server, alice, held):
        future = held(post, guarded)
        until(lambda: waiting.ROOM.waiting() == 1)
        deny(decider=decider(alice), approval_id=Approval.objects.get().id)
        answer = future.result(10)
        assert_problem(answer, 403, "approval_denied")
        assert answer["Preference-Applied"] == "wait=10"
        assert provider_server.requests == []

    def test_a_decision_written_by_another_process_wakes_the_call(
        self, guarded, provider_server, held
    ):
        """No decision in this process to wake it: the poller finds it in the database."""
        future = held(timed(lambda: post(guarded, "wait=30")))
        until(lambda: waiting.ROOM.waiting() == 1)
        Approval.objects.update(status=ApprovalStatus.DENIED, decided_at=timezone.now())
        answer, took = future.result(10)
        assert_problem(answer, 403, "approval_denied")
        assert answer["Preference-Applied"] == "wait=30"
        assert took < 5

    def test_the_waiting_call_holds_no_database_connection(
        self, guarded, provider_server, alice, held, room, monkeypatch
    ):
        provider_server.answer(201, {"id": 1})
        open_while_waiting: list[list[str]] = []
        wait = room.wait

        def spied(approval_id: str, *, timeout: float) -> bool:
            open_while_waiting.append(
                [c.alias for c in connections.all(initialized_only=True) if c.connection]
            )
            return wait(approval_id, timeout=timeout)

        monkeypatch.setattr(room, "wait", spied)
        future = held(post, guarded)
        until(lambda: room.waiting() == 1)
        approve_call(decider=decider(alice), approval_id=Approval.objects.get().id)
        assert future.result(10).status_code == 201
        assert open_while_waiting == [[]]

    def test_held_calls_count_against_the_tokens_calls_in_flight(
        self, guarded, provider_server, alice, held, settings
    ):
        settings.CREDVAULT_PROXY_MAX_CONCURRENT = 2
        provider_server.answer(200, {"ok": True})
        assert_problem(post(guarded, prefer=""), 403, "approval_required")
        first, second = held(post, guarded), held(post, guarded)
        until(lambda: waiting.ROOM.waiting() == 2)
        refused = call(guarded, "GET", "github", "/user")
        assert_problem(refused, 429, "rate_limited")
        assert refused.content.count(b"in flight")
        deny(decider=decider(alice), approval_id=Approval.objects.get().id)
        for future in (first, second):
            assert_problem(future.result(10), 403, "approval_denied")
        assert call(guarded, "GET", "github", "/user").status_code == 200


@pytest.mark.django_db
class TestTheWaitAsked:
    def test_undecided_after_n_seconds_is_pending(self, guarded, provider_server):
        started = time.monotonic()
        answer = post(guarded, "wait=1")
        assert 1 <= time.monotonic() - started < 3
        assert_problem(answer, 403, "approval_pending")
        assert answer["Preference-Applied"] == "wait=1"
        assert answer["Retry-After"]
        assert provider_server.requests == []

    def test_a_wait_over_the_maximum_is_cut_to_it(self, guarded, settings):
        settings.CREDVAULT_APPROVAL_MAX_WAIT = 1
        started = time.monotonic()
        answer = post(guarded, "wait=600")
        assert 1 <= time.monotonic() - started < 3
        assert_problem(answer, 403, "approval_pending")
        assert answer["Preference-Applied"] == "wait=1"

    @pytest.mark.parametrize("prefer", ["wait=soon", "wait=-1", "wait=1.5", "wait=0", "wait"])
    def test_a_wait_that_is_no_seconds_is_ignored(self, guarded, prefer):
        # A wait would answer approval_pending with Preference-Applied; no clock is read.
        answer = post(guarded, prefer)
        assert_problem(answer, 403, "approval_required")
        assert not answer.has_header("Preference-Applied")

    def test_a_call_that_need_not_wait_says_nothing_of_it(self, guarded, provider_server, alice):
        provider_server.answer(201, {"id": 1})
        asked = assert_problem(post(guarded, prefer=""), 403, "approval_required")
        approve_call(decider=decider(alice), approval_id=asked["approvalId"], allow_for_minutes=30)
        answer = post(guarded, "wait=10")
        assert answer.status_code == 201
        assert not answer.has_header("Preference-Applied")
        assert sent_prefer(provider_server.requests[-1]) is None

    def test_a_denied_call_is_answered_at_once(self, guarded, alice):
        asked = assert_problem(post(guarded, prefer=""), 403, "approval_required")
        deny(decider=decider(alice), approval_id=asked["approvalId"])
        answer = post(guarded, "wait=10")  # a wait would say Preference-Applied: wait=10
        assert_problem(answer, 403, "approval_denied")
        assert not answer.has_header("Preference-Applied")

    def test_the_wait_preference_never_reaches_a_provider(self, alice_api, provider_server):
        """Outside every approve rule too, only the other preferences are sent on."""
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
        token = agent_token(alice_api, "bot")
        provider_server.answer(200, {"ok": True})
        for prefer, sent in (("wait=5", None), ("return=minimal, wait=5", "return=minimal")):
            answer = call(token, "GET", "github", "/user", headers={"Prefer": prefer})
            assert answer.status_code == 200
            assert not answer.has_header("Preference-Applied")
            assert sent_prefer(provider_server.requests[-1]) == sent


def test_nginx_waits_longer_than_the_longest_held_call():
    """The production nginx's read timeout of brokered calls outlasts the default longest wait."""
    conf = (Path(settings.BASE_DIR) / "deploy" / "nginx.conf").read_text(encoding="utf-8")
    location = conf.split("location /api/v1/agent/proxy/ {", 1)[1].split("}", 1)[0]
    [seconds] = re.findall(r"proxy_read_timeout (\d+)s;", location)
    [default] = [s.default for s in SETTINGS if s.name == "CREDVAULT_APPROVAL_MAX_WAIT"]
    assert int(seconds) > int(default)


class TestReadWait:
    @pytest.mark.parametrize(
        ("prefer", "seconds", "kept"),
        [
            ("wait=10", 10, None),
            ("WAIT = 10", 10, None),
            ('wait="7"', 7, None),
            ("respond-async, wait=10", 10, "respond-async"),
            ("wait=3, wait=9", 3, None),
            ("wait=x, wait=9", 0, None),
            ('return=minimal; a="x,wait=2", wait=4', 4, 'return=minimal; a="x,wait=2"'),
            ("wait=100000", 120, None),
            ("handling=strict", 0, "handling=strict"),
        ],
    )
    def test_the_first_wait_counts_cut_to_the_maximum(self, settings, prefer, seconds, kept):
        settings.CREDVAULT_APPROVAL_MAX_WAIT = 120
        asked, headers = read_wait({"prefer": prefer, "accept": "*/*"})
        assert asked == seconds
        assert headers.get("prefer") == kept
        assert headers["accept"] == "*/*"

    def test_headers_without_prefer_are_the_same(self):
        headers = {"accept": "*/*"}
        assert read_wait(headers) == (0, headers)
        assert read_wait(headers)[1] is headers
