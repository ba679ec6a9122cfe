"""Slow clients and a slow provider: `python -m scripts.slow_clients [--seconds 10]`.

Starts credvault under gunicorn as `make run` does (gunicorn.conf.py's gevent workers; or
`--worker-class sync`, or `--worker-class gthread --threads 16`, to compare) on a fresh SQLite
database, then for `--seconds`:

- 16 clients each send the headers and the first bytes of a store whose body never comes (one
  with Content-Length: 1000, the next unfinished chunked), and open another as soon as one is
  cut off (CREDVAULT_BODY_TIMEOUT);
- 32 clients each call the test operation over and over (or, with `--via proxy`, make a
  brokered call of an agent), for a provider that takes 2 s to answer (a stand-in on
  127.0.0.1);
- two probes ask `/healthz` and the list of 10 services in turn, each request with 5 s to
  answer.

Prints each probe's count, p50, p99 and maximum latency and its failures (no answer within
5 s, or not 200), and exits non-zero when `/healthz` or the list ever failed to answer. A
measurement for docs/performance.md: no latency is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import sys
import threading
import time
from collections import Counter

from scripts.bench import production_workers
from tests.support.harness import BASE_DIR, Gunicorn, manage, request, server_env
from tests.support.stand_ins import ProviderServer

WORK = BASE_DIR / "var" / "slow"
HELD_BODIES = 16
SLOW_CALLS = 32
PROVIDER_SECONDS = 2.0
PROBE_TIMEOUT = 5.0


def held_body(port: int, token: str, chunked: bool, stop: threading.Event) -> None:
    """Keep one store's body open, again each time the server cuts it off."""
    head = (
        "PUT /api/v1/services/credentials HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
    )
    framing = (
        'Transfer-Encoding: chunked\r\n\r\n5\r\n{"ser\r\n'
        if chunked
        else ('Content-Length: 1000\r\n\r\n{"service":"x')
    )
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                sock.sendall((head + framing).encode())
                while not stop.is_set() and sock.recv(4096):
                    pass  # the server's 408, then its close
        except OSError:
            time.sleep(0.05)


def slow_calls(url: str, token: str, via: str, stop: threading.Event, statuses: list[int]) -> None:
    """Call the slow provider over and over: through the test operation (an account token),
    or as a brokered call (`via` proxy: an agent token)."""
    body = {"service": "github", "credentials": [{"keyName": "api_key", "value": "ghp_slow"}]}
    while not stop.is_set():
        try:
            if via == "proxy":
                status, _, _ = request(
                    "GET", f"{url}/api/v1/agent/proxy/github/user", token=token, timeout=30
                )
            else:
                status, _, _ = request(
                    "POST", f"{url}/api/v1/services/test", token=token, body=body, timeout=30
                )
        except OSError:
            status = 0  # no answer
        statuses.append(status)


def probe(url: str, path: str, token: str | None, until: float, results: list) -> None:
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            status, _, _ = request("GET", f"{url}{path}", token=token, timeout=PROBE_TIMEOUT)
        except OSError:
            status = 0  # no answer in time
        results.append((status, time.perf_counter() - started))
        time.sleep(0.05)


def summary(name: str, results: list[tuple[int, float]]) -> tuple[str, int]:
    latencies = sorted(seconds * 1000 for _, seconds in results)
    failures = sum(1 for status, _ in results if status != 200)
    if not latencies:
        return f"{name}: no request", 1
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return (
        f"{name:<10} {len(results):>5} requests  p50 {statistics.median(latencies):7.1f} ms  "
        f"p99 {p99:7.1f} ms  max {latencies[-1]:7.1f} ms  failures {failures}",
        failures,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=None, help="default: gunicorn.conf.py's")
    parser.add_argument("--worker-class", default=None, help="default: gunicorn.conf.py's")
    parser.add_argument("--threads", type=int, default=1, help="threads of each worker")
    parser.add_argument(
        "--via",
        choices=("test", "proxy"),
        default="test",
        help="the slow calls: the test operation, or brokered calls of an agent",
    )
    args = parser.parse_args()

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    provider = ProviderServer().start()
    provider.answer(200, b"{}", delay_seconds=PROVIDER_SECONDS)
    env = server_env(
        f"sqlite:///{WORK / 'slow.sqlite3'}",
        CREDVAULT_RATE_LIMIT="10000000/min",
        CREDVAULT_TEST_RATE_LIMIT="10000000/min",
        CREDVAULT_PROXY_RATE_LIMIT="10000000/min",
        # Every call of the one agent token in flight at once: the load is the point here.
        CREDVAULT_PROXY_MAX_CONCURRENT="100000",
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider.url}),
    )
    if args.worker_class:
        env["GUNICORN_CMD_ARGS"] = f"--worker-class {args.worker_class} --threads {args.threads}"
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "create_account", "slow")
    token = manage(env, "issue_token", "slow")
    manage(env, "create_agent", "slow", "caller", "--service", "github")
    caller = manage(env, "issue_agent_token", "slow", "caller")
    workers = args.workers or production_workers()
    with Gunicorn(env, workers=workers, log=WORK / "gunicorn.log") as server:
        for index in range(10):
            body = {
                "service": f"svc-{index}",
                "credentials": [{"keyName": "api_key", "value": "v"}],
            }
            status, _, _ = request(
                "PUT", f"{server.url}/api/v1/services/credentials", token=token, body=body
            )
            if status != 201:
                raise RuntimeError(f"seeding the list failed with {status}")
        body = {"service": "github", "credentials": [{"keyName": "api_key", "value": "ghp"}]}
        request("PUT", f"{server.url}/api/v1/services/credentials", token=token, body=body)
        stop = threading.Event()
        statuses: list[int] = []
        threads = [
            threading.Thread(
                target=held_body, args=(server.port, token, i % 2 == 1, stop), daemon=True
            )
            for i in range(HELD_BODIES)
        ] + [
            threading.Thread(
                target=slow_calls,
                args=(
                    server.url,
                    caller if args.via == "proxy" else token,
                    args.via,
                    stop,
                    statuses,
                ),
                daemon=True,
            )
            for _ in range(SLOW_CALLS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(1)  # let the slow ones take their threads
        until = time.monotonic() + args.seconds
        health: list = []
        listing: list = []
        probes = [
            threading.Thread(target=probe, args=(server.url, "/healthz", None, until, health)),
            threading.Thread(
                target=probe, args=(server.url, "/api/v1/services", token, until, listing)
            ),
        ]
        for thread in probes:
            thread.start()
        for thread in probes:
            thread.join()
        stop.set()
    provider.stop()
    print(
        f"slow clients: {HELD_BODIES} bodies held open, {SLOW_CALLS} {args.via} calls waiting "
        f"{PROVIDER_SECONDS:.0f} s on the provider (answers by status: "
        f"{dict(Counter(statuses))}), "
        f"{args.seconds:.0f} s, {workers} workers, worker class "
        f"{args.worker_class or 'of gunicorn.conf.py'}"
    )
    failed = 0
    for name, results in (("/healthz", health), ("list10", listing)):
        line, failures = summary(name, results)
        print(line)
        failed += failures
    print("slow clients: passed" if not failed else "slow clients: FAILED: a probe went unanswered")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
