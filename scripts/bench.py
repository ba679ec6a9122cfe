"""Benchmark: `python -m scripts.bench` (or `make bench`).

For SQLite and PostgreSQL in turn: seed a fresh database, start gunicorn with production
settings (DEBUG off, gunicorn.conf.py's workers: two per core) and the benchmark's URL of its
baseline (scripts/bench_settings.py), and load it from a separate process (wrk when
installed, else a Python load generator) in interleaved rounds (`--rounds`, 5 by default, of
measurements of `--seconds`, 5 by default) at 16 connections: the baseline `/bench/baseline`
(a plain Django view behind the whole middleware stack, as `/healthz` was before probes were
answered ahead of it: scripts/bench_urls.py), list with 10 and with 100 services, store of a
3-field set, the agent read, the agent read by 16 agents of one account and by one agent in
each of 16 accounts (successive requests take their 16 tokens in turn), and test of a custom
service (`no_verifier`). Each endpoint is measured between two baselines; prints rps, p50 and
p99 as ratios to their mean, the server's CPU per request (the workers', and PostgreSQL's own
processes') and the non-2xx count; then rps, latency and non-2xx at 64 connections, each
worker's memory, and the growth tables (list with 10/100/1,000 services, store with 1/10/20
fields, token lookup with 10 and 100,000 tokens). The summary holds each backend's targets
(TARGETS: the median ratio of rps to the baseline; the p99 factor; no non-2xx) and whether
each is met, and the ratio of the agent read's rps with one account to that with 16 accounts:
each request appends to its account's audit chain under the account's head lock, so one busy
account's requests may wait on each other. That ratio is a measurement, with no target.
The figures are measurements, not tests.

Each round's table also gives the share of the machine's CPU that other work took meanwhile
("other cpu": someone's tests, say); a round where it is high is disturbed, and is run again.
`--only ENDPOINT...` measures those endpoints alone (each still between two baselines) and
skips the growth tables; `--sample-locks` samples PostgreSQL's `pg_stat_activity` throughout
each measurement: how many backends wait on a lock (a store's wait on its account's audit head
lock), and how often the transaction they wait for is idle in transaction, waiting on its
worker rather than working in PostgreSQL. `--postgres-database` names a database of one's own
(it is dropped and made again), so that two benchmarks on one server do not meet.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import runpy
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.harness import BASE_DIR, Gunicorn, fresh_postgres, listening, server_env

WORK = BASE_DIR / "var" / "bench"
BACKENDS = {
    "sqlite": f"sqlite:///{WORK / 'bench.sqlite3'}",
    "postgres": "postgres://postgres@127.0.0.1:5432/credvault_bench",
}
# The baseline: a plain Django view behind the whole middleware stack (scripts/bench_urls.py),
# served with the benchmark's settings, which add only that URL.
BASELINE = "/bench/baseline"
SETTINGS = "scripts.bench_settings"
# The targets, per backend: each endpoint's median over the rounds of its rps ratio to the
# baseline. On PostgreSQL the database server shares the machine's cores with the workers and
# every request, reads included, commits its audit event before it answers (docs/performance.md).
TARGETS = {
    "sqlite": {"list10": 0.40, "list100": 0.25, "agent_read": 0.40, "store": 0.30, "test": 0.40},
    "postgres": {"list10": 0.25, "list100": 0.18, "agent_read": 0.25, "store": 0.14, "test": 0.25},
}
P99_FACTOR = 4.0  # every endpoint's p99 at most this many times its baselines' (median)
# The agent read by AGENTS agents of one account beside one agent in each of AGENTS accounts:
# every request appends to its account's audit chain under that account's head lock, so the
# requests of one busy account may wait on each other. A measurement, with no target.
AGENTS = 16
ONE_ACCOUNT, MANY_ACCOUNTS = "agent_read_1_account", f"agent_read_{AGENTS}_accounts"
# What `--only` may name: every endpoint measured against the baseline (`endpoints`).
ENDPOINT_NAMES = ("list10", "list100", "store", "agent_read", ONE_ACCOUNT, MANY_ACCOUNTS, "test")
FIELDS = {
    "api_key": "sk-bench-0123456789abcdef",
    "client_secret": "bench-secret-abcdef0123456789",
    "private_key": "-----BEGIN KEY-----\nMIIBbench\n-----END KEY-----\n",
}


# --- seeding (runs in a subprocess with the backend's environment) ---------------------------


def seed(pad_tokens: int) -> dict:
    import django

    django.setup()
    from django.core.management import call_command

    from services import agents, credentials
    from services.accounts import create_account, issue_token
    from services.audit import Actor
    from services.grants import given_in_list
    from services.masking import Secret
    from services.models import Account, ApiToken
    from services.sealed import OpenedSet

    if pad_tokens:
        account = Account.objects.get(name="list10")
        ApiToken.objects.bulk_create(
            (
                ApiToken(account=account, prefix=f"pad_{i:08d}", digest=f"{i:064x}")
                for i in range(pad_tokens)
            ),
            batch_size=5000,
        )
        return {"tokens": ApiToken.objects.count()}

    call_command("migrate", verbosity=0)
    out: dict[str, str | list[str]] = {}

    def store(actor: Actor, service: str, fields: list[tuple[str, Secret]]) -> None:
        checked = credentials.credential_set(service=service, fields=OpenedSet(fields))
        credentials.store_credentials(actor=actor, credentials=checked)

    def account_with(name: str, services: int, fields: int = 3) -> str:
        account = create_account(name=name)
        token = issue_token(account=account, name="bench").plaintext
        actor = Actor.command(account.pk)
        for index in range(services):
            values = [
                (f"field_{i}", Secret(f"value-{index}-{i}-" + "x" * 24)) for i in range(fields)
            ]
            store(actor, f"svc-{index:04d}", values)
        return token

    def agents_reading(name: str, agent_names: list[str]) -> list[str]:
        """An account (made now unless it exists) holding the `github` set, with an agent of
        each name granted it: their tokens."""
        account = Account.objects.filter(name=name).first() or create_account(name=name)
        actor = Actor.command(account.pk)
        store(actor, "github", [("api_key", Secret(FIELDS["api_key"]))])
        issued = []
        for agent in agent_names:
            agents.put_agent(
                actor=actor,
                name=agent,
                services=given_in_list([agents.GrantSpec("github", access="read")]),
            )
            issued.append(agents.issue_agent_token(actor=actor, name=agent).issued.plaintext)
        return issued

    out["list10"] = account_with("list10", 10)
    out["list100"] = account_with("list100", 100)
    out["list1000"] = account_with("list1000", 1000)
    out["store"] = account_with("store", 0)
    out["test"] = account_with("test", 0)
    out["agent_owner"] = account_with("agent", 0)
    [out["agent"]] = agents_reading("agent", ["reader"])
    out[ONE_ACCOUNT] = agents_reading("shared", [f"reader-{i:02d}" for i in range(AGENTS)])
    out[MANY_ACCOUNTS] = [
        token for i in range(AGENTS) for token in agents_reading(f"own-{i:02d}", ["reader"])
    ]
    return out


def run_seed(env: dict[str, str], pad_tokens: int = 0) -> dict:
    """`seed(pad_tokens)` in a subprocess against the backend of `env`, under credvault's
    settings: what it returns, as JSON."""
    result = subprocess.run(
        [sys.executable, "-m", "scripts.bench", "--seed", str(pad_tokens)],
        cwd=BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "credvault.settings"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"seeding failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- load --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """A check of each answer's body, for an endpoint whose status alone does not say whether it
    served the request: it classifies the answer `ok`, `non_2xx` or `error`, counted in the
    tables' non-2xx and errors. `classify(status, body)` for the Python load generator, and `lua`
    the same rule for wrk: the body of a Lua function `outcome(status, body)` returning one of
    those three strings."""

    classify: Callable[[int, bytes], str]
    lua: str


@dataclass
class Endpoint:
    name: str
    method: str
    path: str
    token: str | None = None
    body: dict | None = None
    rotate: tuple[str, ...] = ()  # tokens that successive requests take in turn, for `token`
    headers: dict[str, str] = field(default_factory=dict)  # sent besides (and over) our own
    # A JSON body with one `%d` and no other `%`, in place of `body`: each request's own
    # number in it (a JSON-RPC id, say), counted from 1 by the Python generator and from
    # n * 10**9 + 1 by wrk's n-th thread (n from 0).
    numbered_body: str | None = None
    check: Check | None = None  # each answer's body read and classified; else its status only


@dataclass
class Result:
    requests: int
    rps: float
    p50: float  # milliseconds
    p99: float
    non_2xx: int
    errors: int
    cpu_ms: float = 0.0
    db_cpu_ms: float = 0.0  # PostgreSQL's processes, on the same cores
    # The share of the machine's CPU that neither the server, PostgreSQL nor the load took:
    # other work on the machine (other people's tests, say), which disturbs the measurement.
    other_cpu: float = 0.0
    locks: LockQueue | None = None  # `--sample-locks` on PostgreSQL


def _headers(endpoint: Endpoint, token: str | None) -> dict[str, str]:
    """A request's headers but Host, Connection and Content-Length: the token's, a JSON body's
    Content-Type, and the endpoint's own, which take the place of those."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if endpoint.body is not None or endpoint.numbered_body is not None:
        headers["Content-Type"] = "application/json"
    return {**headers, **endpoint.headers}


def _wrk_script(endpoint: Endpoint, threads: int) -> Path:
    lines = [f'wrk.method = "{endpoint.method}"']
    lines += [
        f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}"
        for name, value in _headers(endpoint, endpoint.token).items()
    ]
    if endpoint.body is not None:
        lines.append(f"wrk.body = {json.dumps(json.dumps(endpoint.body))}")
    # setup runs once per thread, in wrk's main Lua state: it gives each thread its own start
    # in what successive requests take, and keeps the threads for `done`.
    per_thread: list[str] = []
    per_request: list[str] = []
    body = "nil"  # wrk.body
    if endpoint.rotate:
        # Each request of a thread takes the next token; each thread starts at its own place
        # in the list, so that the threads do not send the same tokens at the same moment.
        step = len(endpoint.rotate) // threads
        lines.append(f"local tokens = {{{', '.join(json.dumps(t) for t in endpoint.rotate)}}}")
        per_thread.append(f'  thread:set("turn", #threads * {step})')
        per_request += [
            "  turn = (turn or 0) % #tokens + 1",
            '  wrk.headers["Authorization"] = "Bearer " .. tokens[turn]',
        ]
    if endpoint.numbered_body is not None:
        lines.append(f"local numbered = {json.dumps(endpoint.numbered_body)}")
        per_thread.append('  thread:set("number", #threads * 1000000000)')
        per_request.append("  number = number + 1")
        body = "string.format(numbered, number)"
    if per_thread or endpoint.check:
        lines += [
            "local threads = {}",
            "function setup(thread)",
            *per_thread,
            "  table.insert(threads, thread)",
            "end",
        ]
    if per_request:
        lines += [
            "function request()",
            *per_request,
            f"  return wrk.format(nil, nil, nil, {body})",
            "end",
        ]
    if endpoint.check:
        # Each thread counts its answers the check fails; `done` writes the sums for `wrk`.
        lines += [
            "function outcome(status, body)",
            endpoint.check.lua.rstrip(),
            "end",
            "failed, non_2xx = 0, 0",
            "function response(status, headers, body)",
            "  local result = outcome(status, body)",
            '  if result == "non_2xx" then',
            "    non_2xx = non_2xx + 1",
            '  elseif result ~= "ok" then',
            "    failed = failed + 1",
            "  end",
            "end",
            "function done(summary, latency, requests)",
            "  local failed, non_2xx = 0, 0",
            "  for _, thread in ipairs(threads) do",
            '    failed = failed + thread:get("failed")',
            '    non_2xx = non_2xx + thread:get("non_2xx")',
            "  end",
            '  io.write(string.format("checked: failed %d non-2xx %d\\n", failed, non_2xx))',
            "end",
        ]
    # One file per process: two benchmarks running at once must not run each other's tokens.
    path = WORK / f"{endpoint.name}-{os.getpid()}.lua"
    path.write_text("\n".join(lines) + "\n")
    return path


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def wrk(url: str, endpoint: Endpoint, connections: int, seconds: float) -> Result:
    threads = min(2, connections)
    script = _wrk_script(endpoint, threads)
    try:
        output = subprocess.run(
            [
                "wrk",
                f"-t{threads}",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--latency",
                "--timeout",
                "10s",
                "-s",
                str(script),
                url + endpoint.path,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        script.unlink(missing_ok=True)
    if "Latency Distribution" not in output:
        raise RuntimeError(f"wrk gave no latency distribution:\n{output}")
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    socket_errors = sum(int(n) for n in errors.groups()) if errors else 0
    if endpoint.check:  # the check's counts, a status over 399 among its non-2xx
        checked = re.search(r"checked: failed (\d+) non-2xx (\d+)", output)
        if checked is None:
            raise RuntimeError(f"wrk gave no counts of the checked answers:\n{output}")
        non_2xx, failed = int(checked.group(2)), int(checked.group(1))
    else:
        non_2xx, failed = int(non_2xx.group(1)) if non_2xx else 0, 0
    return Result(
        requests=requests,
        rps=float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        p50=_ms(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1)),
        p99=_ms(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1)),
        non_2xx=non_2xx,
        errors=failed + socket_errors,
    )


async def _python_load(url: str, endpoint: Endpoint, connections: int, seconds: float) -> Result:
    """The fallback generator: raw HTTP/1.1 over asyncio, one request per connection."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(endpoint.body).encode() if endpoint.body is not None else b""

    def raw_request(token: str | None, payload: bytes) -> bytes:
        head = (
            f"{endpoint.method} {endpoint.path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        )
        head += "".join(f"{name}: {value}\r\n" for name, value in _headers(endpoint, token).items())
        if payload:
            head += f"Content-Length: {len(payload)}\r\n"
        return head.encode() + b"\r\n" + payload

    # Each request takes the next token of `rotate`, whichever connection sends it, as wrk's,
    # and the next number of `numbered_body`.
    tokens = endpoint.rotate or (endpoint.token,)
    raws = [raw_request(token, body) for token in tokens]
    turn, numbers = itertools.count(), itertools.count(1)

    def next_request() -> bytes:
        if endpoint.numbered_body is None:
            return raws[next(turn) % len(raws)]
        numbered = (endpoint.numbered_body % next(numbers)).encode()
        return raw_request(tokens[next(turn) % len(tokens)], numbered)

    latencies: list[float] = []
    outcomes: list[str] = []  # each answer's: `ok`, `non_2xx` or (by the check) `error`
    errors = 0
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal errors
        while time.monotonic() < deadline:
            raw = next_request()
            started = time.perf_counter()
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(raw)
                await writer.drain()
                data = await reader.read()
                writer.close()
                status = int(data.split(b" ", 2)[1])
                latencies.append((time.perf_counter() - started) * 1000)
            except (OSError, IndexError, ValueError):
                errors += 1
                continue
            if endpoint.check:
                outcomes.append(endpoint.check.classify(status, data.partition(b"\r\n\r\n")[2]))
            else:
                outcomes.append("ok" if 200 <= status < 400 else "non_2xx")

    await asyncio.gather(*(worker() for _ in range(connections)))
    ordered = sorted(latencies) or [0.0]
    return Result(
        requests=len(outcomes),
        rps=len(outcomes) / seconds,
        p50=ordered[len(ordered) // 2],
        p99=ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        non_2xx=outcomes.count("non_2xx"),
        # what the check says is neither `ok` nor `non_2xx` is an error, as in wrk's `response`
        errors=errors + len(outcomes) - outcomes.count("ok") - outcomes.count("non_2xx"),
    )


def load(url: str, endpoint: Endpoint, connections: int, seconds: float) -> Result:
    if shutil.which("wrk"):
        return wrk(url, endpoint, connections, seconds)
    return asyncio.run(_python_load(url, endpoint, connections, seconds))


# --- server measurements -----------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total / ticks


def machine_cpu_seconds() -> float:
    """CPU time the machine's cores have spent on anything but idling (/proc/stat), time
    taken by the host from this virtual machine (steal) included."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """This process's CPU time and that of its ended children (wrk, the seeding)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def database_pids() -> list[int]:
    """The local PostgreSQL server's processes (none for SQLite, which runs in the workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@dataclass
class LockQueue:
    """PostgreSQL's backends of the benchmark's database, sampled during a measurement: how
    many wait on a lock (`wait_event_type` Lock: in the store, the account's head lock), and
    what the transactions they wait for were doing. `idle in transaction` is a holder
    PostgreSQL waits on: its worker has not sent the next statement yet (under gevent the
    holder's greenlet waits for its turn while the worker runs its other greenlets)."""

    samples: int = 0
    waiting: int = 0  # backends waiting on a lock, summed over the samples
    most_waiting: int = 0
    held: int = 0  # samples in which some backend waited on another
    holder_idle: int = 0  # ... and the backend it waited on was idle in transaction

    @property
    def mean_waiting(self) -> float:
        return self.waiting / max(1, self.samples)

    @property
    def idle_share(self) -> float:
        """Of the samples with a queue, the share whose lock holder was idle in transaction."""
        return self.holder_idle / max(1, self.held)


class LockSampler:
    """Samples PostgreSQL's lock queue (`LockQueue`) every `interval` seconds from a thread and
    a connection of its own, while a measurement runs. It costs PostgreSQL some CPU (one
    `pg_stat_activity` read with `pg_blocking_pids` a sample): compare sampled runs with
    sampled runs."""

    QUERY = (
        "SELECT pid, state, wait_event_type, pg_blocking_pids(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'"
    )

    def __init__(self, url: str, interval: float = 0.02) -> None:
        self.url = url.replace("postgres://", "postgresql://", 1)
        self.interval = interval
        self.queue = LockQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psycopg

        queue = self.queue
        with psycopg.connect(self.url, autocommit=True) as db:
            while not self._stop.wait(self.interval):
                rows = db.execute(self.QUERY).fetchall()
                state = {pid: st for pid, st, _, _ in rows}
                waiting = [blockers for _, _, kind, blockers in rows if kind == "Lock"]
                holders = {pid for blockers in waiting for pid in blockers}
                queue.samples += 1
                queue.waiting += len(waiting)
                queue.most_waiting = max(queue.most_waiting, len(waiting))
                if holders:
                    queue.held += 1
                    # Waiters block waiters too (the first in a row's queue holds its tuple
                    # lock), and they are active: an idle one is the transaction holding it.
                    idle = [pid for pid in holders if state.get(pid) == "idle in transaction"]
                    queue.holder_idle += bool(idle)


def measure(
    server: Gunicorn,
    endpoint: Endpoint,
    connections: int,
    seconds: float,
    sample_locks: str | None = None,
) -> Result:
    """`load`, with the server's CPU per request (its workers', and PostgreSQL's processes');
    with `sample_locks` (a PostgreSQL URL), PostgreSQL's lock queue sampled throughout."""
    pids = [server.process.pid, *server.worker_pids()]
    db_pids = database_pids()
    before, db_before = cpu_seconds(pids), cpu_seconds(db_pids)
    machine_before, own_before, started = machine_cpu_seconds(), own_cpu_seconds(), time.time()
    if sample_locks:
        with LockSampler(sample_locks) as sampler:
            result = load(server.url, endpoint, connections, seconds)
        result.locks = sampler.queue
    else:
        result = load(server.url, endpoint, connections, seconds)
    requests = max(1, result.requests)
    server_cpu, db_cpu = cpu_seconds(pids) - before, cpu_seconds(db_pids) - db_before
    result.cpu_ms = server_cpu * 1000 / requests
    result.db_cpu_ms = db_cpu * 1000 / requests
    other = (machine_cpu_seconds() - machine_before) - server_cpu - db_cpu
    other -= own_cpu_seconds() - own_before
    result.other_cpu = max(0.0, other) / ((time.time() - started) * (os.cpu_count() or 1))
    return result


def bracketing(before: Result, after: Result) -> Result:
    """The baseline around an endpoint's measurement: the mean of the one before and the one
    after it (their rates, latencies and CPU per request; their non-2xx counts added)."""
    return Result(
        requests=before.requests + after.requests,
        rps=(before.rps + after.rps) / 2,
        p50=(before.p50 + after.p50) / 2,
        p99=(before.p99 + after.p99) / 2,
        non_2xx=before.non_2xx + after.non_2xx,
        errors=before.errors + after.errors,
        cpu_ms=(before.cpu_ms + after.cpu_ms) / 2,
        db_cpu_ms=(before.db_cpu_ms + after.db_cpu_ms) / 2,
        other_cpu=max(before.other_cpu, after.other_cpu),
    )


def production_workers() -> int:
    """The number of workers `make run` and production start with on this machine."""
    return runpy.run_path(str(BASE_DIR / "gunicorn.conf.py"))["workers"]


# --- the run -----------------------------------------------------------------------------------


def fresh_database(backend: str) -> None:
    if backend == "sqlite":
        WORK.mkdir(parents=True, exist_ok=True)
        for path in WORK.glob("bench.sqlite3*"):
            path.unlink()
        return
    fresh_postgres(BACKENDS["postgres"])


def endpoints(tokens: dict) -> list[Endpoint]:
    credentials = [{"keyName": k, "value": v} for k, v in FIELDS.items()]
    return [
        Endpoint("baseline", "GET", BASELINE),
        Endpoint("list10", "GET", "/api/v1/services", tokens["list10"]),
        Endpoint("list100", "GET", "/api/v1/services", tokens["list100"]),
        Endpoint(
            "store",
            "PUT",
            "/api/v1/services/credentials",
            tokens["store"],
            {"service": "bench-store", "credentials": credentials},
        ),
        Endpoint("agent_read", "GET", "/api/v1/agent/credentials/github", tokens["agent"]),
        *(  # side by side, so that the machine's drift moves both alike
            Endpoint(name, "GET", "/api/v1/agent/credentials/github", rotate=tuple(tokens[name]))
            for name in (ONE_ACCOUNT, MANY_ACCOUNTS)
        ),
        Endpoint(
            "test",
            "POST",
            "/api/v1/services/test",
            tokens["test"],
            {"service": "my-internal-api", "credentials": credentials},
        ),
    ]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def interleaved(
    server: Gunicorn, eps: list[Endpoint], args: argparse.Namespace, backend: str
) -> tuple[list[dict[str, tuple[Result, Result]]], list[Result]]:
    """`args.rounds` rounds of every endpoint after the first (the baseline), each between two
    baselines, printed round by round: each round's {name: (result, its baselines)}, and
    every baseline measured."""
    # Each endpoint is measured between two baselines, and its ratios are to their mean:
    # the machine's speed drifts within a round, by 10% and more over a minute, and the
    # two baselines 5 s either side see the drift on both sides of it. Neighbouring
    # endpoints share the baseline between them.
    rounds: list[dict[str, tuple[Result, Result]]] = []
    baselines: list[Result] = []
    # The baselines are sampled too: the sampler's queries take some of the same two cores.
    sample = BACKENDS[backend] if args.sample_locks and backend == "postgres" else None
    for number in range(args.rounds):
        results = {}
        before = measure(server, eps[0], 16, args.seconds, sample)
        baselines.append(before)
        for ep in eps[1:]:
            result = measure(server, ep, 16, args.seconds, sample)
            after = measure(server, eps[0], 16, args.seconds, sample)
            baselines.append(after)
            results[ep.name] = (result, bracketing(before, after))
            before = after
        rounds.append(results)
        rows = [
            [
                "endpoint",
                "rps",
                "baseline rps",
                "ratio",
                "p50 ms",
                "p99 ms",
                "p99/base",
                "cpu ms/req",
                "base cpu",
                *(["db cpu ms/req"] if backend == "postgres" else []),
                *(["lock waiters mean", "max", "holder idle"] if sample else []),
                "other cpu",
                "non-2xx",
            ]
        ]
        for name, (r, base) in results.items():
            rows.append(
                [
                    name,
                    f"{r.rps:.0f}",
                    f"{base.rps:.0f}",
                    f"{r.rps / base.rps:.0%}",
                    f"{r.p50:.2f}",
                    f"{r.p99:.2f}",
                    f"{r.p99 / base.p99:.1f}x",
                    f"{r.cpu_ms:.2f}",
                    f"{base.cpu_ms:.2f}",
                    *([f"{r.db_cpu_ms:.2f}"] if backend == "postgres" else []),
                    *(
                        [
                            f"{r.locks.mean_waiting:.2f}",
                            str(r.locks.most_waiting),
                            f"{r.locks.idle_share:.0%}",
                        ]
                        if r.locks
                        else []
                    ),
                    f"{max(r.other_cpu, base.other_cpu):.0%}",
                    str(r.non_2xx + r.errors + base.non_2xx + base.errors),
                ]
            )
        print(f"\n--- {backend}, round {number + 1} of {args.rounds}, 16 connections")
        print(table(rows), flush=True)
    return rounds, baselines


def bench_env(backend: str, **overrides: str) -> dict[str, str]:
    """The server's environment: the benchmark's settings (the baseline's URL), limits far
    above what the load reaches, room for the account of 1,000 services."""
    return server_env(
        BACKENDS[backend],
        DJANGO_SETTINGS_MODULE=SETTINGS,
        CREDVAULT_RATE_LIMIT="100000000/min",
        CREDVAULT_TEST_RATE_LIMIT="100000000/min",
        CREDVAULT_MAX_SERVICES_PER_ACCOUNT="2000",
        **overrides,
    )


def medians(
    rounds: list[dict[str, tuple[Result, Result]]],
) -> tuple[dict[str, float], dict[str, float]]:
    """Each endpoint's median over the rounds of its rps ratio and its p99 factor."""
    names = list(rounds[0])
    ratios = {n: statistics.median(r[n][0].rps / r[n][1].rps for r in rounds) for n in names}
    factors = {n: statistics.median(r[n][0].p99 / r[n][1].p99 for r in rounds) for n in names}
    return ratios, factors


def accounts_compared(rounds: list[dict[str, tuple[Result, Result]]]) -> dict:
    """The agent read of one account's agents beside that of as many accounts' agents: each
    one's median rps and p99 over the rounds, and the rounds' ratios of their rps (one account
    over many) with the median of those."""
    one = [r[ONE_ACCOUNT][0] for r in rounds]
    many = [r[MANY_ACCOUNTS][0] for r in rounds]
    by_round = [a.rps / b.rps for a, b in zip(one, many, strict=True)]
    return {
        "rps": (statistics.median(r.rps for r in one), statistics.median(r.rps for r in many)),
        "p99": (statistics.median(r.p99 for r in one), statistics.median(r.p99 for r in many)),
        "ratio": statistics.median(by_round),
        "by_round": by_round,
    }


def run_backend(backend: str, args: argparse.Namespace) -> dict:
    fresh_database(backend)
    env = bench_env(backend)
    print(f"\n=== {backend}: seeding", flush=True)
    tokens = run_seed(env)
    summary: dict = {"ratios": {}, "p99_factor": {}, "non_2xx": 0}
    with Gunicorn(env, workers=args.workers, log=WORK / f"gunicorn-{backend}.log") as server:
        eps = endpoints(tokens)
        if args.only:  # the baseline, and the endpoints asked for
            eps = [eps[0], *(ep for ep in eps[1:] if ep.name in args.only)]
        for endpoint in eps:  # warm up each worker and path
            load(server.url, endpoint, 4, 1)
        rounds, baselines = interleaved(server, eps, args, backend)
        print(f"\n--- {backend}, 64 connections")
        rows = [["endpoint", "rps", "p50 ms", "p99 ms", "non-2xx"]]
        for ep in eps:
            r = measure(server, ep, 64, args.seconds)
            summary["non_2xx"] += r.non_2xx + r.errors
            rows.append(
                [ep.name, f"{r.rps:.0f}", f"{r.p50:.2f}", f"{r.p99:.2f}", str(r.non_2xx + r.errors)]
            )
        print(table(rows), flush=True)
        summary["ratios"], summary["p99_factor"] = medians(rounds)
        if ONE_ACCOUNT in rounds[0] and MANY_ACCOUNTS in rounds[0]:
            summary["accounts"] = accounts_compared(rounds)
        summary["non_2xx"] += sum(
            r.non_2xx + r.errors
            for r in [*baselines, *(pair[0] for rnd in rounds for pair in rnd.values())]
        )
        memory = [f"{rss_mb(pid):.0f} MB" for pid in server.worker_pids()]
        print(f"\nworker memory (RSS): {', '.join(memory)}")
        if args.only:
            return summary

        # Growth: one connection, so that the latency is the request's own.
        print(f"\n--- {backend}, growth (1 connection, p50 latency)")
        rows = [["case", "p50 ms", "p99 ms"]]
        for size in (10, 100, 1000):
            r = load(
                server.url,
                Endpoint(f"g{size}", "GET", "/api/v1/services", tokens[f"list{size}"]),
                1,
                3,
            )
            rows.append([f"list {size} services", f"{r.p50:.2f}", f"{r.p99:.2f}"])
        for fields in (1, 10, 20):
            body = {
                "service": f"grow-{fields}",
                "credentials": [
                    {"keyName": f"field_{i}", "value": "v" * 40} for i in range(fields)
                ],
            }
            r = load(
                server.url,
                Endpoint(
                    f"s{fields}", "PUT", "/api/v1/services/credentials", tokens["store"], body
                ),
                1,
                3,
            )
            rows.append([f"store {fields} fields", f"{r.p50:.2f}", f"{r.p99:.2f}"])
        small = load(server.url, Endpoint("t10", "GET", "/api/v1/services", tokens["list10"]), 1, 3)
        padded = run_seed(env, pad_tokens=100_000)["tokens"]
        large = load(
            server.url, Endpoint("t100k", "GET", "/api/v1/services", tokens["list10"]), 1, 3
        )
        rows.append(["list 10, ~10 tokens in the table", f"{small.p50:.2f}", f"{small.p99:.2f}"])
        rows.append(
            [f"list 10, {padded} tokens in the table", f"{large.p50:.2f}", f"{large.p99:.2f}"]
        )
        print(table(rows), flush=True)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--seconds", type=float, default=5, help="seconds of each measurement (default 5)"
    )
    parser.add_argument("--backend", choices=[*BACKENDS, "all"], default="all")
    parser.add_argument(
        "--workers", type=int, help="gunicorn workers (default: what gunicorn.conf.py gives)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=ENDPOINT_NAMES,
        metavar="ENDPOINT",
        help="measure these endpoints only, each between two baselines, and skip the growth "
        f"tables ({', '.join(ENDPOINT_NAMES)})",
    )
    parser.add_argument(
        "--sample-locks",
        action="store_true",
        help="PostgreSQL: sample pg_stat_activity during each measurement for the backends "
        "waiting on a lock, and whether the transaction they wait for is idle in transaction",
    )
    parser.add_argument(
        "--postgres-database",
        default="credvault_bench",
        help="the PostgreSQL database to drop, create and load (default credvault_bench)",
    )
    args = parser.parse_args()
    BACKENDS["postgres"] = BACKENDS["postgres"].rsplit("/", 1)[0] + "/" + args.postgres_database
    if args.seed is not None:
        print(json.dumps(seed(args.seed)))
        return 0

    WORK.mkdir(parents=True, exist_ok=True)
    generator = "wrk" if shutil.which("wrk") else "the Python load generator (wrk not installed)"
    args.workers = args.workers or production_workers()
    config = runpy.run_path(str(BASE_DIR / "gunicorn.conf.py"))
    print(
        f"load from {generator}; {os.cpu_count()} cores; {args.workers} gunicorn workers "
        f"({config['worker_class']})"
    )
    summaries = {}
    for backend in BACKENDS if args.backend == "all" else [args.backend]:
        if backend == "postgres" and not listening(5432):
            print("\n=== postgres: no server on 127.0.0.1:5432, skipped")
            continue
        summaries[backend] = run_backend(backend, args)

    print("\n=== targets (median of the rounds' ratios to the baseline)")
    rows = [["backend", "endpoint", "rps ratio", "target", "p99 factor", "max", "result"]]
    for backend, summary in summaries.items():
        for name, target in TARGETS[backend].items():
            if name not in summary["ratios"]:
                continue
            ratio, factor = summary["ratios"][name], summary["p99_factor"][name]
            ok = ratio >= target and factor <= P99_FACTOR
            rows.append(
                [
                    backend,
                    name,
                    f"{ratio:.1%}",  # one decimal: 39.96% is not 40%
                    f">= {target:.0%}",
                    f"{factor:.2f}x",
                    f"<= {P99_FACTOR:.0f}x",
                    "met" if ok else "MISSED",
                ]
            )
        rows.append(
            [
                backend,
                "non-2xx at 16 and 64",
                str(summary["non_2xx"]),
                "0",
                "",
                "",
                "met" if summary["non_2xx"] == 0 else "MISSED",
            ]
        )
    print(table(rows))
    if not any("accounts" in summary for summary in summaries.values()):
        return 0

    print(
        f"\n=== the agent read by {AGENTS} agents of one account beside one agent in each of"
        f" {AGENTS} accounts\n(16 connections, medians of the rounds; a measurement, no target)"
    )
    rows = [
        [
            "backend",
            "1 account rps",
            f"{AGENTS} accounts rps",
            f"1 / {AGENTS} accounts",
            "by round",
            "1 account p99 ms",
            f"{AGENTS} accounts p99 ms",
        ]
    ]
    for backend, summary in summaries.items():
        if "accounts" not in summary:
            continue
        compared = summary["accounts"]
        rows.append(
            [
                backend,
                *(f"{rps:.0f}" for rps in compared["rps"]),
                f"{compared['ratio']:.1%}",
                " ".join(f"{ratio:.0%}" for ratio in compared["by_round"]),
                *(f"{p99:.2f}" for p99 in compared["p99"]),
            ]
        )
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
