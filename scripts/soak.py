"""Soak test: `python -m scripts.soak --seconds 60` (or `make soak`).

Runs credvault under gunicorn on a fresh PostgreSQL database (`credvault_soak`, dropped and
created; another with --database-url) and lets concurrent clients mix for a set time: list,
test, store, remove, audit listing and agent reads. Each client owns its services, so the last
successful store of every service is known; every agent read of an owned service is checked at
once, byte for byte. At the end it checks that every service holds exactly the set of its last
successful store (or nothing after a removal), that the audit chain verifies and holds one
event per request, and that no request got a 5xx. Prints the figures; exits non-zero on any
failure. Verification goes to a fake provider on 127.0.0.1, never to a real one.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from tests.support.harness import (
    BASE_DIR,
    Gunicorn,
    fresh_postgres,
    manage,
    request,
    server_env,
)
from tests.support.stand_ins import ProviderServer

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/credvault_soak"
OPERATIONS = [
    ("store", 35),
    ("agent_read", 25),
    ("list", 15),
    ("test", 10),
    ("remove", 10),
    ("audit", 5),
]


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    by_op: Counter = field(default_factory=Counter)
    by_status: Counter = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, op: str, status: int, seconds: float) -> None:
        with self.lock:
            self.by_op[op] += 1
            self.by_status[status] += 1
            self.latencies.append(seconds)

    def problem(self, text: str) -> None:
        with self.lock:
            if len(self.problems) < 50:
                self.problems.append(text)


class Client(threading.Thread):
    def __init__(self, number: int, url: str, token: str, agent: str, tally: Tally, until: float):
        super().__init__(daemon=True)
        self.number, self.url, self.token, self.agent = number, url, token, agent
        self.tally, self.until = tally, until
        self.services = [f"soak-{number}-{j}" for j in range(3)]
        self.expected: dict[str, dict[str, str] | None] = dict.fromkeys(self.services)
        self.random = random.Random(number)
        self.rounds = 0

    def call(self, op: str, method: str, path: str, *, token: str, body=None):
        started = time.perf_counter()
        try:
            status, _, content = request(method, f"{self.url}{path}", token=token, body=body)
        except (OSError, http.client.HTTPException) as error:
            self.tally.problem(f"{op}: connection failed ({type(error).__name__})")
            self.tally.add(op, 0, time.perf_counter() - started)
            return 0, b""
        self.tally.add(op, status, time.perf_counter() - started)
        if status >= 500:
            self.tally.problem(f"{op} {path}: {status}")
        return status, content

    def run(self) -> None:
        ops, weights = zip(*OPERATIONS, strict=True)
        while time.monotonic() < self.until:
            self.rounds += 1
            op = self.random.choices(ops, weights)[0]
            getattr(self, op)(self.random.choice(self.services))

    def store(self, service: str) -> None:
        marker = f"{service}-r{self.rounds}"
        values = {
            "api_key": f"key-{marker}",
            "client_secret": f"  {marker} with spaces  ",
            "private_key": f"-----BEGIN KEY-----\n{marker}\u00e9\n-----END KEY-----\n",
        }
        credentials = [{"keyName": k, "value": v} for k, v in values.items()]
        status, _ = self.call(
            "store",
            "PUT",
            "/api/v1/services/credentials",
            token=self.token,
            body={"service": service, "credentials": credentials},
        )
        if status in (200, 201):
            if (status == 201) != (self.expected[service] is None):
                self.tally.problem(f"store {service}: {status} but expected state differs")
            self.expected[service] = values
        else:
            self.tally.problem(f"store {service}: {status}")

    def agent_read(self, service: str) -> None:
        status, content = self.call(
            "agent_read", "GET", f"/api/v1/agent/credentials/{service}", token=self.agent
        )
        expected = self.expected[service]
        if status == 404 and expected is None:
            return
        if status != 200 or expected is None:
            self.tally.problem(f"agent read {service}: {status}, expected {expected is not None}")
            return
        got = {c["keyName"]: c["value"] for c in json.loads(content)["credentials"]}
        if got != expected:
            self.tally.problem(f"agent read {service}: not the last stored set")

    def remove(self, service: str) -> None:
        status, _ = self.call(
            "remove", "DELETE", f"/api/v1/services/credentials/{service}", token=self.token
        )
        if status == 204 and self.expected[service] is not None:
            self.expected[service] = None
        elif not (status == 404 and self.expected[service] is None):
            self.tally.problem(f"remove {service}: {status}")

    def list(self, service: str) -> None:
        status, _ = self.call("list", "GET", "/api/v1/services", token=self.token)
        if status != 200:
            self.tally.problem(f"list: {status}")

    def test(self, service: str) -> None:
        target = self.random.choice(["github", "my-internal-api"])
        status, content = self.call(
            "test",
            "POST",
            "/api/v1/services/test",
            token=self.token,
            body={"service": target, "credentials": [{"keyName": "api_key", "value": "k"}]},
        )
        expected = "accepted" if target == "github" else "no_verifier"
        if status != 200 or json.loads(content)["reason"] != expected:
            self.tally.problem(f"test {target}: {status} {content[:100]!r}")

    def audit(self, service: str) -> None:
        status, _ = self.call("audit", "GET", "/api/v1/audit-events?limit=20", token=self.token)
        if status != 200:
            self.tally.problem(f"audit listing: {status}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    args = parser.parse_args()

    if args.database_url.startswith("postgres"):
        fresh_postgres(args.database_url)
    provider = ProviderServer().start()
    provider.answer(200, {"login": "soak"})
    env = server_env(
        args.database_url,
        CREDVAULT_RATE_LIMIT="10000000/min",
        CREDVAULT_TEST_RATE_LIMIT="10000000/min",
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider.url}),
    )
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "create_account", "soak")
    token = manage(env, "issue_token", "soak")
    services = [f"soak-{i}-{j}" for i in range(args.clients) for j in range(3)]
    grants = [arg for service in services for arg in ("--service", service)]
    manage(env, "create_agent", "soak", "soak-agent", "--read", *grants)
    agent = manage(env, "issue_agent_token", "soak", "soak-agent")
    # From the command line: the account token's issuance, the agent's creation and its token.
    baseline_events = 3

    tally = Tally()
    started = time.monotonic()
    with Gunicorn(env, workers=args.workers, log=BASE_DIR / "var" / "soak-gunicorn.log") as server:
        until = time.monotonic() + args.seconds
        clients = [Client(i, server.url, token, agent, tally, until) for i in range(args.clients)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=args.seconds + 60)
        load_seconds = time.monotonic() - started
        load_requests = sum(tally.by_op.values())

        # Every service holds exactly the set of its last successful store, or nothing.
        final_mismatches = 0
        for client in clients:
            for service in client.services:
                status, _, content = request(
                    "GET", f"{server.url}/api/v1/agent/credentials/{service}", token=agent
                )
                expected = client.expected[service]
                got = (
                    {c["keyName"]: c["value"] for c in json.loads(content)["credentials"]}
                    if status == 200
                    else None
                )
                if status not in (200, 404) or got != expected:
                    final_mismatches += 1
                    tally.problem(f"final state of {service}: {status}")
        checks = len(services)
    provider.stop()

    audit_count = int(
        manage(
            env,
            "shell",
            "-v",
            "0",
            "-c",
            "from services.models import AuditEvent; print(AuditEvent.objects.count())",
        )
    )
    expected_events = baseline_events + load_requests + checks
    verify = subprocess.run(
        [sys.executable, "manage.py", "verify_audit", "soak"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    server_errors = sum(n for status, n in tally.by_status.items() if status >= 500 or status == 0)
    lat = tally.latencies
    print(
        f"soak: {load_requests} requests in {load_seconds:.1f} s "
        f"({load_requests / load_seconds:.0f}/s) from {args.clients} clients on "
        f"{args.workers} workers, {args.database_url.split(':')[0]}"
    )
    print("  by operation: " + ", ".join(f"{op} {n}" for op, n in sorted(tally.by_op.items())))
    print("  by status:    " + ", ".join(f"{s} {n}" for s, n in sorted(tally.by_status.items())))
    print(
        f"  latency: p50 {percentile(lat, 0.5):.1f} ms, p99 {percentile(lat, 0.99):.1f} ms, "
        f"mean {statistics.fmean(lat) * 1000 if lat else 0:.1f} ms"
    )
    print(f"  final state: {checks - final_mismatches}/{checks} services hold their last store")
    print(f"  audit: {audit_count} events for {expected_events} requests; {verify.stdout.strip()}")
    print(f"  server errors or lost connections: {server_errors}; problems: {len(tally.problems)}")
    for problem in tally.problems[:20]:
        print(f"    - {problem}")
    ok = (
        server_errors == 0
        and not tally.problems
        and final_mismatches == 0
        and audit_count == expected_events
        and verify.returncode == 0
    )
    print("soak: passed" if ok else "soak: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
