"""Instructions per request of each endpoint, counted by valgrind's callgrind:
`python -m scripts.bench_instructions [--requests N] [--runs R]`.

A throughput benchmark (scripts/bench.py) cannot resolve a change of a few percent on a small
machine that other work shares; callgrind counts the instructions a process executes, whatever
else the machine does, so two trees of the project can be compared to a fraction of a percent.

How: a fresh SQLite database under var/bench_instructions/, the environment of a throwaway
server (tests/support/harness.py `server_env`: DEBUG off, its own keys; `testserver` allowed for
Django's test client; every rate limit far above what the run reaches), migrated and seeded
through management commands and the HTTP API alone, so that the same file runs unchanged in
any tree of the project. Then a child Python process runs under
`valgrind --tool=callgrind --instr-atstart=no`, its instrumentation off while it starts, and
sends requests through `django.test.Client` (the whole middleware stack and URL resolver, no
socket and no server): for each endpoint `--warmup` requests, then `--requests` requests
measured. This process drives it over its stdin and stdout: for each endpoint it switches
instrumentation on and zeroes the counters (`callgrind_control -i on`, `-z`), lets the child
run its requests, and has callgrind dump the counts (`callgrind_control --dump=ENDPOINT`)
before it switches instrumentation off again. Each dump's `totals:` (Ir, the instructions
executed), divided by the number of requests, is the endpoint's instructions per request.

The endpoints are scripts/bench.py's: the benchmark's baseline `/bench/baseline` (when the tree
has scripts/bench_urls.py), list with 10 and with 100 services, store of a 3-field set, the
agent read, and the test operation of a custom service (`no_verifier`); then, when the tree has
scripts/bench_proxy.py (as every tree with the proxy route does), scripts/bench_proxy.py's
brokered call `proxy`: `GET /api/v1/agent/proxy/github/user` with the token of an agent whose
grant is `github` with the default brokered access (its own account, holding a github set),
which must answer 200 throughout its warm-up; and, when the tree has consent
(services/consent/approvals.py), `approved`: the same call by the same account's agent
`approver`, whose grant's approve rule covers it, under a standing "allow for 30 minutes"
(asked and decided in the seeding). GitHub is stood in for by scripts/bench_proxy.py's
upstream (`python -m scripts.bench_proxy --upstream PORT`: asyncio, HTTP/1.1 with keep-alive, a
fixed 40-byte JSON body with its Content-Length) on 127.0.0.1, started for each run as a
process of its own, not under callgrind, so its work is not counted;
CREDVAULT_PROVIDER_BASE_URLS points github at it, and CREDVAULT_PROXY_RATE_LIMIT and
CREDVAULT_PROXY_MAX_CONCURRENT are far above the run. A brokered call counts credvault's side of
it: authentication, the grant and the set, decryption, placement, the pooled outbound client
(one kept-alive connection, opened in the warm-up), reading and redacting the answer, the audit
event. An answer that comes streamed is read to its end, as a server would send it on.

What is counted: the process's own instructions in user space (Python, Django, credvault,
SQLite's library, OpenSSL), not the kernel's (system calls, the file system, fsync, and the
socket's send and receive of a brokered call), nor any other process's (the upstream's). Each
endpoint's token is used first by its own warm-up, so that the once-a-minute write of a
token's `last_used_at` falls in the measurement only when its warm-up and measurement together
take over a minute (the run says so); the audit checkpoint, written once a minute of wall time
per account, is put off beyond the run (CREDVAULT_AUDIT_CHECKPOINT_SECONDS): under callgrind a
minute holds some hundred requests, not the thousands of production.

Two identical runs count within some hundredths of a percent of each other, but the counts
also depend, by some tenths of a percent, on where the process's memory lies (the addresses
that identity hashes and the alignment of copies see), which anything incidental moves: the
length of the tree's path, of the environment, of the database's path. So `--runs` (3 by
default) repeats the whole run (a new database, a new child) each with the environment longer
by LAYOUT_STEP characters, and prints each run's counts, their mean and their spread (max -
min over the mean): a change between trees smaller than the spread is no change. An
endpoint's count also depends a little on what ran before it in the process: compare runs of
the same endpoints (`--only` changes that).

`--json FILE` keeps the results, and `--compare FILE...` prints the endpoints of several such
files side by side, each as a change from the first (one file per tree of the project, say).
The callgrind files stay under var/bench_instructions/run-N/ for callgrind_annotate. The
figures are measurements, not tests.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

from tests.support.harness import BASE_DIR, free_port, listening, server_env

WORK = BASE_DIR / "var" / "bench_instructions"
BASELINE = "/bench/baseline"
HAS_BASELINE = (BASE_DIR / "scripts" / "bench_urls.py").is_file()
SETTINGS = "scripts.bench_settings" if HAS_BASELINE else "credvault.settings"
# The brokered call, answered by scripts/bench_proxy.py's upstream (both came with the route).
HAS_PROXY = (BASE_DIR / "scripts" / "bench_proxy.py").is_file()
# The same call under a grant's approve rule, with a standing approval (consent came with it).
HAS_CONSENT = (BASE_DIR / "services" / "consent" / "approvals.py").is_file()
PROXY = "/api/v1/agent/proxy/github/user"
FIELDS = {  # scripts/bench.py's 3-field set
    "api_key": "sk-bench-0123456789abcdef",
    "client_secret": "bench-secret-abcdef0123456789",
    "private_key": "-----BEGIN KEY-----\nMIIBbench\n-----END KEY-----\n",
}
CREDENTIALS = [{"keyName": key, "value": value} for key, value in FIELDS.items()]
NO_LIMIT = "1000000000/day"  # no request of the run is throttled
LATER_THAN_THE_RUN = str(10**9)  # seconds
# Each run's environment is longer than the last one's by this many characters, which moves
# the process's memory (the stack first, the environment being on it): see the module.
LAYOUT_VARIABLE, LAYOUT_STEP = "BENCH_INSTRUCTIONS_LAYOUT", 37
# A JSON object of further settings for the server's environment (a key manager's).
EXTRA_SETTINGS = "BENCH_INSTRUCTIONS_SETTINGS"


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str
    token: str | None = None  # the key of its token in the seeded tokens
    body: dict | None = None
    status: int | None = None  # the one status its warm-up must see (else any 2xx)


ENDPOINTS = [
    *([Endpoint("baseline", "GET", BASELINE)] if HAS_BASELINE else []),
    Endpoint("list10", "GET", "/api/v1/services", "list10"),
    Endpoint("list100", "GET", "/api/v1/services", "list100"),
    Endpoint(
        "store",
        "PUT",
        "/api/v1/services/credentials",
        "store",
        {"service": "bench-store", "credentials": CREDENTIALS},
    ),
    Endpoint("agent_read", "GET", "/api/v1/agent/credentials/github", "agent"),
    Endpoint(
        "test",
        "POST",
        "/api/v1/services/test",
        "test",
        {"service": "my-internal-api", "credentials": CREDENTIALS},
    ),
    *([Endpoint("proxy", "GET", PROXY, "proxy", status=200)] if HAS_PROXY else []),
    *([Endpoint("approved", "GET", PROXY, "approved", status=200)] if HAS_CONSENT else []),
]
ENDPOINT_NAMES = [endpoint.name for endpoint in ENDPOINTS]


def environment(database: Path, upstream: str | None) -> dict[str, str]:
    """A throwaway server's environment (this tree's tests/support/harness.py), for Django's test
    client, with nothing throttled and no audit checkpoint during the run; github's API at
    `upstream` (the stand-in's URL), when there is one."""
    brokered = {
        "CREDVAULT_PROVIDER_BASE_URLS": json.dumps({"github": upstream}),
        "CREDVAULT_PROXY_MAX_CONCURRENT": "1000000",  # one call at a time: never refused
    }
    return server_env(
        f"sqlite:///{database}",
        DJANGO_SETTINGS_MODULE=SETTINGS,
        CREDVAULT_ENV_FILE="",  # no .env of the tree's own
        ALLOWED_HOSTS="127.0.0.1,localhost,testserver",
        CREDVAULT_RATE_LIMIT=NO_LIMIT,
        CREDVAULT_TEST_RATE_LIMIT=NO_LIMIT,
        CREDVAULT_PROXY_RATE_LIMIT=NO_LIMIT,
        CREDVAULT_MAX_SERVICES_PER_ACCOUNT="2000",
        CREDVAULT_AUDIT_CHECKPOINT_SECONDS=LATER_THAN_THE_RUN,
        PYTHONHASHSEED="0",  # the same hashes, and so the same dict probes, in every run
        **(brokered if upstream else {}),
        # Settings of the run's caller (scripts/bench_key_managers.py: a key manager's).
        **json.loads(os.environ.get(EXTRA_SETTINGS, "{}")),
    )


# --- requests, and the seeding (a plain subprocess: `--seed FILE`) -----------------------------


def send(client, endpoint: Endpoint, token: str | None):
    """One request of `endpoint` through Django's test client: its response, read to its end
    (a streamed one too, as a server sends it on, which closes it)."""
    extra = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    body = json.dumps(endpoint.body) if endpoint.body is not None else ""
    response = client.generic(
        endpoint.method, endpoint.path, body, content_type="application/json", **extra
    )
    if response.streaming:
        b"".join(response.streaming_content)
    return response


def answered(endpoint: Endpoint, status: int) -> bool:
    """Whether `status` is the answer `endpoint` must give."""
    return status == endpoint.status if endpoint.status else 200 <= status < 300


def start_upstream() -> tuple[subprocess.Popen, str]:
    """scripts/bench_proxy.py's upstream in a process of its own (not counted): it and its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "scripts.bench_proxy", "--upstream", str(port)],
        cwd=BASE_DIR,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not listening(port):
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("the upstream did not start")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}"


def seed(tokens_file: Path) -> None:
    """Migrate, and make the endpoints' accounts, services and agent through management
    commands and the HTTP API: each endpoint's token, unused yet, written to `tokens_file`."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    def command(*args: str) -> str:
        out = StringIO()
        call_command(*args, stdout=out, stderr=StringIO())
        return out.getvalue().strip()

    client = Client()

    def store(token: str, service: str, credentials: list[dict[str, str]]) -> None:
        body = {"service": service, "credentials": credentials}
        endpoint = Endpoint("seed", "PUT", "/api/v1/services/credentials", body=body)
        response = send(client, endpoint, token)
        if not 200 <= response.status_code < 300:
            raise RuntimeError(f"seeding {service}: {response.status_code} {response.content!r}")

    def account_with(name: str, services: int) -> str:
        """An account holding `services` sets of 3 fields: a token of its own for the
        benchmark, which the seeding does not use (another token stores the sets)."""
        command("create_account", name)
        seeding = command("issue_token", name, "--name", "seed")
        for index in range(services):
            fields = [
                {"keyName": f"field_{i}", "value": f"value-{index}-{i}-" + "x" * 24}
                for i in range(3)
            ]
            store(seeding, f"svc-{index:04d}", fields)
        return command("issue_token", name, "--name", "bench")

    command("migrate", "--no-input", "--verbosity", "0")
    tokens = {
        "list10": account_with("list10", 10),
        "list100": account_with("list100", 100),
        "store": account_with("store", 0),
        "test": account_with("test", 0),
    }
    owner = account_with("agent", 0)  # its token only stores the set: no endpoint's
    store(owner, "github", [{"keyName": "api_key", "value": FIELDS["api_key"]}])
    command("create_agent", "agent", "reader", "--service", "github", "--read")
    tokens["agent"] = command("issue_agent_token", "agent", "reader")
    if HAS_PROXY:  # an account of its own: its set, and an agent granted github (brokered)
        owner = account_with("proxy", 0)
        store(owner, "github", [{"keyName": "api_key", "value": FIELDS["api_key"]}])
        command("create_agent", "proxy", "broker", "--service", "github")
        tokens["proxy"] = command("issue_agent_token", "proxy", "broker")
    if HAS_CONSENT:  # the same account's agent whose grant asks; its call allowed for 30 min
        tokens["approved"] = allowed_for_half_an_hour(client, command)
    tokens_file.write_text(json.dumps(tokens))


def allowed_for_half_an_hour(client, command) -> str:
    """The `proxy` account's agent `approver`, whose grant's approve rule covers GET /user: its
    call asked once and allowed for 30 minutes. Its token."""
    from services.consent.decisions import Decider, approve_call
    from services.models import Account, Grant

    command("create_agent", "proxy", "approver", "--service", "github")
    Grant.objects.filter(agent__name="approver").update(
        approve=[{"methods": ["GET"], "paths": ["/user"]}]
    )
    token = command("issue_agent_token", "proxy", "approver")
    response = send(client, Endpoint("ask", "GET", PROXY), token)
    if response.status_code != 403:
        raise RuntimeError(f"the approver's call answered {response.status_code}")
    account = Account.objects.get(name="proxy")
    decider = Decider(account_id=account.pk, request_id="bench", member="bench@example.com")
    approve_call(decider=decider, approval_id=response.json()["approvalId"], allow_for_minutes=30)
    return token


# --- the child, under callgrind (`--child TOKENS_FILE`) ----------------------------------------


def child(tokens_file: Path, names: list[str], warmup: int, requests: int) -> None:
    """Each endpoint's warm-up, then, on the parent's word, its measured requests: prints
    `ready NAME`, waits for `go`, sends `requests` requests, prints `done NAME SECONDS` and
    waits for `next` (the parent dumps the counts meanwhile), then reports the statuses."""
    import django

    django.setup()
    from django.test import Client

    tokens = json.loads(tokens_file.read_text())
    client = Client()
    for endpoint in (e for e in ENDPOINTS if e.name in names):
        token = tokens.get(endpoint.token) if endpoint.token else None
        started = time.monotonic()
        for _ in range(warmup):
            response = send(client, endpoint, token)
            if not answered(endpoint, response.status_code):
                content = b"" if response.streaming else response.content
                raise RuntimeError(f"{endpoint.name}: {response.status_code} {content[:500]!r}")
        statuses = [0] * requests
        gc.collect()  # each measurement starts from a collected heap
        print(f"ready {endpoint.name}", flush=True)
        if sys.stdin.readline().strip() != "go":
            return
        measured = time.monotonic()
        for index in range(requests):
            statuses[index] = send(client, endpoint, token).status_code
        ended = time.monotonic()
        print(f"done {endpoint.name} {ended - measured:.1f} {ended - started:.1f}", flush=True)
        if sys.stdin.readline().strip() != "next":
            return
        failed = [status for status in statuses if not answered(endpoint, status)]
        print(f"statuses {endpoint.name} {len(failed)} {failed[:1]}", flush=True)
    print("finished", flush=True)


# --- the parent --------------------------------------------------------------------------------


def callgrind_control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, text=True)


def dump_totals(path: Path) -> tuple[str, int]:
    """A callgrind dump's trigger (its label) and its `totals:` line, the Ir of every function
    of the dump added up. (`summary:` is not read: after instrumentation was switched off and
    on, it is not this dump's total unless the counters were zeroed.)"""
    trigger, totals = "", None
    with path.open() as lines:
        for line in lines:
            if line.startswith("desc: Trigger:"):
                trigger = line.split(":", 2)[2].strip()
            elif line.startswith("totals:"):
                totals = int(line.split()[1])
    if totals is None:
        raise RuntimeError(f"{path}: no totals line")
    return trigger, totals


@dataclass
class Measured:
    instructions: dict[str, float]  # per request
    seconds: dict[str, float]  # the measured requests' wall time under callgrind
    warm_and_measured: dict[str, float]


def run_once(number: int, names: list[str], args: argparse.Namespace) -> Measured:
    """A fresh database, seeded; the child under callgrind, driven endpoint by endpoint."""
    directory = WORK / f"run-{number}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    upstream, upstream_url = start_upstream() if HAS_PROXY else (None, None)
    try:
        return drive(number, names, args, directory, upstream_url)
    finally:
        if upstream is not None:
            upstream.terminate()
            upstream.wait(10)


def drive(
    number: int,
    names: list[str],
    args: argparse.Namespace,
    directory: Path,
    upstream_url: str | None,
) -> Measured:
    """Run `number`'s seeding and its child under callgrind, github's API at `upstream_url`."""
    database, tokens_file = directory / "db.sqlite3", directory / "tokens.json"
    env = {
        **environment(database, upstream_url),
        LAYOUT_VARIABLE: "x" * LAYOUT_STEP * (number - 1),
    }
    print(f"run {number}: seeding {database}", file=sys.stderr, flush=True)
    script = [sys.executable, "-m", "scripts.bench_instructions"]
    seeded = subprocess.run(
        [*script, "--seed", str(tokens_file)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if seeded.returncode != 0:
        raise RuntimeError(f"seeding failed: {seeded.stderr[-2000:]}")
    out_file = directory / "callgrind.out"
    valgrind = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_file}",
        f"--log-file={directory / 'valgrind.log'}",
    ]
    arguments = ["--child", str(tokens_file), "--requests", str(args.requests)]
    arguments += ["--warmup", str(args.warmup), "--only", *names]
    stderr = (directory / "child.stderr").open("w")
    process = subprocess.Popen(
        [*valgrind, *script, *arguments],
        cwd=BASE_DIR,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    pid = str(process.pid)
    labels: dict[str, str] = {}
    seconds: dict[str, float] = {}
    warm_and_measured: dict[str, float] = {}

    def line() -> list[str]:
        text = process.stdout.readline()
        if not text:
            process.wait()
            tail = (directory / "child.stderr").read_text()[-2000:]
            raise RuntimeError(f"the child ended ({process.returncode}): {tail}")
        return text.split()

    def say(word: str) -> None:
        process.stdin.write(word + "\n")
        process.stdin.flush()

    try:
        while (words := line())[0] != "finished":
            if words[0] == "ready":
                name = words[1]
                print(f"run {number}: {name}", file=sys.stderr, flush=True)
                callgrind_control("-i", "on", pid)
                callgrind_control("-z", pid)
                say("go")
            elif words[0] == "done":
                name = words[1]
                seconds[name], warm_and_measured[name] = float(words[2]), float(words[3])
                labels[f"dump {name}"] = name
                callgrind_control(f"--dump={name}", pid)
                callgrind_control("-i", "off", pid)
                say("next")
            elif words[0] == "statuses" and words[2] != "0":
                raise RuntimeError(f"{words[1]}: {words[2]} requests failed, e.g. {words[3:]}")
        process.stdin.close()
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        stderr.close()
    instructions = {}
    for path in directory.glob("callgrind.out.*"):
        trigger, totals = dump_totals(path)
        if trigger in labels:
            instructions[labels[trigger]] = totals / args.requests
    missing = set(names) - set(instructions)
    if missing:
        raise RuntimeError(f"no dump of {', '.join(sorted(missing))} in {directory}")
    return Measured(instructions, seconds, warm_and_measured)


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def spread(values: list[float]) -> float:
    """(max - min) / mean: the spread of the runs' counts."""
    return (max(values) - min(values)) / statistics.mean(values)


def report(runs: list[Measured], names: list[str], args: argparse.Namespace) -> dict:
    header = ["endpoint", *(f"run {i + 1}" for i in range(len(runs))), "mean"]
    rows = [header + (["spread"] if len(runs) > 1 else []) + ["s measured"]]
    means = {}
    for name in names:
        values = [run.instructions[name] for run in runs]
        means[name] = statistics.mean(values)
        rows.append(
            [
                name,
                *(f"{value:,.0f}" for value in values),
                f"{means[name]:,.0f}",
                *([f"{spread(values):.3%}"] if len(runs) > 1 else []),
                "/".join(f"{run.seconds[name]:.1f}" for run in runs),
            ]
        )
    print(f"\ninstructions per request (Ir), {args.requests} requests an endpoint, {BASE_DIR}")
    print(table(rows))
    slow = sorted(
        {name for run in runs for name, taken in run.warm_and_measured.items() if taken >= 60}
    )
    if slow:
        print(
            f"note: warm-up and measurement of {', '.join(slow)} took a minute or more: a "
            "write of the token's last_used_at may be among its measured requests"
        )
    return {
        "label": args.label or BASE_DIR.name,
        "tree": str(BASE_DIR),
        "commit": commit(),
        "requests": args.requests,
        "runs": [run.instructions for run in runs],
        "mean": means,
    }


def commit() -> str:
    result = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip()


def compare(files: list[Path]) -> None:
    """Endpoints of several `--json` files side by side, each a change from the first's."""
    results = [json.loads(path.read_text()) for path in files]
    first = results[0]
    names = [n for n in first["mean"] if all(n in r["mean"] for r in results)]
    rows = [["endpoint", *(f"{r['label']} ({r['commit']})" for r in results)]]
    rows[0] += [f"{r['label']} vs {first['label']}" for r in results[1:]]
    rows[0] += ["spread (max)"]
    for name in names:
        base = first["mean"][name]
        spreads = [spread([run[name] for run in r["runs"]]) for r in results if len(r["runs"]) > 1]
        rows.append(
            [
                name,
                *(f"{r['mean'][name]:,.0f}" for r in results),
                *(f"{r['mean'][name] / base - 1:+.2%}" for r in results[1:]),
                f"{max(spreads):.3%}" if spreads else "-",
            ]
        )
    print("instructions per request (Ir): the mean of each file's runs")
    print(table(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30, help="measured, per endpoint")
    parser.add_argument("--warmup", type=int, default=20, help="requests before, per endpoint")
    parser.add_argument("--runs", type=int, default=3, help="whole runs, for the spread")
    parser.add_argument("--only", nargs="+", choices=ENDPOINT_NAMES, help="these endpoints")
    parser.add_argument("--json", type=Path, help="write the results to this file")
    parser.add_argument("--label", help="the results' name in --json (default: the tree's)")
    parser.add_argument("--compare", nargs="+", type=Path, metavar="FILE", help="--json files")
    parser.add_argument("--seed", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.only or ENDPOINT_NAMES
    if args.compare:
        compare(args.compare)
    elif args.seed:
        seed(args.seed)
    elif args.child:
        child(args.child, names, args.warmup, args.requests)
    else:
        for tool in ("valgrind", "callgrind_control"):
            if not shutil.which(tool):
                sys.exit(f"{tool} is not installed (valgrind's package has both)")
        runs = [run_once(number + 1, names, args) for number in range(args.runs)]
        results = report(runs, names, args)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
