"""Real `manage.py deliver_webhooks` processes against a receiver on 127.0.0.1: a worker
killed with SIGKILL mid-attempt loses nothing, and two workers on PostgreSQL share 1,000
events without sending an attempt twice at once.

The processes share the database of the test's own throwaway server environment (a SQLite
file, or a PostgreSQL database of its own), set up with `manage.py` as an operator would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from tests.conftest import require_local_service
from tests.support.harness import BASE_DIR, fresh_postgres, manage, server_env

pytestmark = pytest.mark.slow

# Accounts, each with one endpoint at /hooks/N of the receiver, and events raised for each.
SETUP = """
import json, os
from services.accounts import create_account
from services.audit import Actor
from services.webhooks.endpoints import create_endpoint
from services.webhooks.events import raise_event

made = []
for n in range(int(os.environ["SETUP_ACCOUNTS"])):
    account = create_account(name=f"acct{n}")
    endpoint = create_endpoint(
        actor=Actor.command(account.id), url=f"{os.environ['SETUP_URL']}/{n}"
    )
    events = [
        raise_event(account_id=account.id, type="agent.deleted", data={"agent": f"bot{i}"})
        for i in range(int(os.environ["SETUP_EVENTS"]))
    ]
    made.append({"path": f"/hooks/{n}", "secret": endpoint.secret, "events": events})
print(json.dumps(made))
"""
# What a lease 60 s old looks like: the time a dead worker's lease takes to run out.
EXPIRE_LEASES = """
from datetime import timedelta
from django.utils import timezone
from services.models import WebhookEndpoint
WebhookEndpoint.objects.update(lease_until=timezone.now() - timedelta(seconds=1))
"""


@dataclass
class Recorder:
    """A webhook receiver that records each request and, per `webhook-id`, any request that
    arrives while another of the same id is still unanswered. With `hold_first`, the first
    request waits, unanswered, until `release` is set."""

    hold_first: bool = False
    received: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    first_arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _in_flight: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def arrive(self, path: str, headers: dict[str, str], body: bytes) -> bool:
        """Record a request; whether it is the one to hold."""
        event_id = headers.get("webhook-id", "")
        with self._lock:
            if self._in_flight[event_id]:
                self.overlaps.append(event_id)
            self._in_flight[event_id] += 1
            self.received.append((path, headers, body))
            first = len(self.received) == 1
        if first:
            self.first_arrived.set()
        return first and self.hold_first

    def answered(self, event_id: str) -> None:
        with self._lock:
            self._in_flight[event_id] -= 1

    def ids(self) -> set[str]:
        with self._lock:
            return {headers["webhook-id"] for _, headers, _ in self.received}


@pytest.fixture
def recorder_at(request) -> Iterator[Callable[..., tuple[Recorder, str]]]:
    servers: list[tuple[ThreadingHTTPServer, Recorder]] = []

    def start(*, hold_first: bool = False) -> tuple[Recorder, str]:
        recorder = Recorder(hold_first=hold_first)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers["x-client-port"] = str(self.client_address[1])
                try:
                    if recorder.arrive(self.path, headers, body):
                        recorder.release.wait(60)
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the worker that sent it is gone
                finally:
                    recorder.answered(headers.get("webhook-id", ""))

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append((server, recorder))
        return recorder, f"http://127.0.0.1:{server.server_address[1]}/hooks"

    yield start
    for server, recorder in servers:
        recorder.release.set()
        server.shutdown()
        server.server_close()


def local_ports(pid: int) -> set[int]:
    """The local ports of the process's TCP sockets (Linux's /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[9] in inodes:
            ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def watch_senders(pids: list[int], stopping: threading.Event) -> dict[int, int]:
    """Which of `pids` holds each local port, sampled until `stopping` is set (a worker
    keeps its connection to an endpoint open between attempts)."""
    owners: dict[int, int] = {}

    def sample() -> None:
        while not stopping.wait(0.1):
            for pid in pids:
                with contextlib.suppress(OSError):  # the worker has stopped
                    owners.update(dict.fromkeys(local_ports(pid), pid))

    threading.Thread(target=sample, daemon=True).start()
    return owners


def set_up(env: dict[str, str], *, url: str, accounts: int, events: int) -> list[dict]:
    manage(env, "migrate", "--no-input")
    shell_env = {
        **env,
        "SETUP_URL": url,
        "SETUP_ACCOUNTS": str(accounts),
        "SETUP_EVENTS": str(events),
    }
    return json.loads(manage(shell_env, "shell", "-c", SETUP).splitlines()[-1])


def start_worker(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "manage.py", "deliver_webhooks", "--poll", "0.1", *args],
            cwd=BASE_DIR,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def backlog(env: dict[str, str]) -> dict[str, str]:
    lines = manage(env, "check_webhooks").splitlines()
    return dict(line.split(": ", 1) for line in lines)


def wait_for(condition: Callable[[], bool], *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def stop(worker: subprocess.Popen) -> int:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    return worker.wait(timeout=30)


def verified(recorder: Recorder, secrets_by_path: dict[str, str]) -> list[dict]:
    """Every request's payload, each verified as Standard Webhooks by the reference library
    with its endpoint's secret (which raises on a bad signature)."""
    return [
        Webhook(secrets_by_path[path]).verify(body, headers)
        for path, headers, body in recorder.received
    ]


def test_a_worker_killed_mid_attempt_leaves_the_event_to_the_next(tmp_path, recorder_at):
    recorder, url = recorder_at(hold_first=True)
    env = server_env(
        f"sqlite:///{tmp_path / 'worker.sqlite3'}", CREDVAULT_WEBHOOK_ALLOWED_HOSTS="127.0.0.1"
    )
    [made] = set_up(env, url=url, accounts=1, events=1)
    [event_id] = made["events"]
    log = tmp_path / "workers.log"

    # The change is committed; the first worker's attempt reaches the receiver, which holds
    # it unanswered, and the worker dies with SIGKILL before any answer.
    first = start_worker(env, log)
    try:
        assert recorder.first_arrived.wait(60), log.read_text()
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL
    recorder.release.set()
    assert backlog(env)["pending deliveries"] == "1"

    # While the dead worker's lease lasts, no other worker sends to the endpoint.
    assert manage(env, "deliver_webhooks", "--once") == "0 attempt(s) made"
    assert recorder.ids() == {event_id}
    assert len(recorder.received) == 1

    manage(env, "shell", "-c", EXPIRE_LEASES)
    second = start_worker(env, log)
    try:
        wait_for(lambda: len(recorder.received) >= 2, seconds=60, what="the second attempt")
        wait_for(lambda: backlog(env)["pending deliveries"] == "0", seconds=60, what="the delivery")
    finally:
        assert stop(second) == 0, log.read_text()

    payloads = verified(recorder, {made["path"]: made["secret"]})
    assert [p["type"] for p in payloads] == ["agent.deleted", "agent.deleted"]
    assert [p["data"]["agent"] for p in payloads] == ["bot0", "bot0"]
    assert [headers["webhook-id"] for _, headers, _ in recorder.received] == [event_id] * 2
    assert recorder.overlaps == []
    assert "Traceback" not in log.read_text()


# This run's own database: two runs on one machine never share it.
POSTGRES_URL = f"postgres://postgres@127.0.0.1:5432/cv_worker_share_{os.getpid()}"


@pytest.fixture
def postgres_database() -> Iterator[str]:
    require_local_service("PostgreSQL", 5432)
    fresh_postgres(POSTGRES_URL)
    yield POSTGRES_URL
    import psycopg

    base, name = POSTGRES_URL.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_two_workers_on_postgresql_share_1000_events_never_sending_one_twice_at_once(
    tmp_path, recorder_at, postgres_database
):
    recorder, url = recorder_at()
    env = server_env(postgres_database, CREDVAULT_WEBHOOK_ALLOWED_HOSTS="127.0.0.1")
    made = set_up(env, url=url, accounts=20, events=50)
    every_event = {event_id for each in made for event_id in each["events"]}
    assert len(every_event) == 1000
    log = tmp_path / "workers.log"

    started = time.monotonic()
    workers = [start_worker(env, log), start_worker(env, log)]
    watching = threading.Event()
    owners = watch_senders([worker.pid for worker in workers], watching)
    try:
        wait_for(lambda: recorder.ids() >= every_event, seconds=180, what="every event")
        elapsed = time.monotonic() - started
        wait_for(lambda: backlog(env)["pending deliveries"] == "0", seconds=60, what="the backlog")
    finally:
        watching.set()
        codes = [stop(worker) for worker in workers]
    assert codes == [0, 0], log.read_text()
    print(f"1000 events to 20 endpoints by two workers in {elapsed:.1f} s")

    assert recorder.overlaps == []
    assert recorder.ids() == every_event
    # Both workers sent some of them.
    senders = Counter(owners.get(int(h["x-client-port"])) for _, h, _ in recorder.received)
    print(f"requests per worker: {dict(senders)}")
    assert {worker.pid for worker in workers} <= set(senders)
    payloads = verified(recorder, {each["path"]: each["secret"] for each in made})
    # Each endpoint's events arrived in their account's sequence order.
    for each in made:
        sequences = [
            payload["data"]["sequence"]
            for (path, _, _), payload in zip(recorder.received, payloads, strict=True)
            if path == each["path"]
        ]
        assert sequences == sorted(sequences)
        assert set(sequences) == set(range(1, 51))
    assert "Traceback" not in log.read_text()
