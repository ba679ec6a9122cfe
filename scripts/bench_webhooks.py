"""The webhooks' figures: `python -m scripts.bench_webhooks [store|latency|drain|dead|all]`.

Each figure is printed against its target:

- `store`: instructions per request of the store (PUT /api/v1/services/credentials, a 3-field
  set) by an account with three endpoints subscribed to every type, against the same store by
  an account with none, counted by callgrind as scripts/bench_instructions.py counts them (its
  environment, its child driven over stdin, `--runs` runs each with the environment longer, so
  that the spread shows what is no change). Target: at most 5 % more.
- `latency`: a loop raises `connection.replaced` events at `--rate` (50) a second for
  `--seconds`, each in a transaction of its own, and notes each event's commit time; a worker
  (`manage.py deliver_webhooks`, its defaults) sends them to a receiver on 127.0.0.1 (asyncio,
  keep-alive, answers 200 at once) that notes when each `webhook-id` arrives. p50 and p99 of
  arrival - commit. Targets: p50 at most 1 s, p99 at most 3 s.
- `drain`: 10,000 events (`--events`) queued for one endpoint before the worker starts; the
  rate from its first delivery to its last at that receiver. Target: 200 a second or more.
- `dead`: the loop raises events at `--rate` for `--seconds` for an endpoint whose port refuses
  connections; the worker's RSS each second while its backlog grows. Target: no growth (the
  last quarter's median RSS within 2 MiB of the second quarter's).

The live figures run on PostgreSQL (`--database postgres`, the default: a database of its own,
cv_webhook_bench, dropped and made again) or SQLite (`--database sqlite`, one worker, WAL). Every
process is on this machine and talks to 127.0.0.1 only. The figures are measurements, not tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scripts.bench_instructions import (
    CREDENTIALS,
    LAYOUT_STEP,
    LAYOUT_VARIABLE,
    Endpoint,
    callgrind_control,
    dump_totals,
    environment,
    send,
    spread,
    table,
)
from tests.support.harness import BASE_DIR, free_port, fresh_postgres, listening, manage, server_env

WORK = BASE_DIR / "var" / "bench_webhooks"
POSTGRES = "postgres://postgres@127.0.0.1:5432/cv_webhook_bench"
STORE_TARGET = 0.05  # at most this much more per store with three endpoints
P50_TARGET, P99_TARGET = 1.0, 3.0  # seconds from commit to receiver
DRAIN_TARGET = 200.0  # events a second, one worker
RSS_SLACK = 2 * 1024 * 1024  # bytes: the dead endpoint's "no growth"
STORES = {
    "none": Endpoint(
        "none",
        "PUT",
        "/api/v1/services/credentials",
        "none",
        {"service": "bench-store", "credentials": CREDENTIALS},
    ),
    "three": Endpoint(
        "three",
        "PUT",
        "/api/v1/services/credentials",
        "three",
        {"service": "bench-store", "credentials": CREDENTIALS},
    ),
}


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


# --- 1. the store with three endpoints against none, under callgrind ---------------------------


def seed_store(tokens_file: Path) -> None:
    """Migrate; the accounts `none` and `three` (three endpoints on 127.0.0.1:9, never sent
    to: no worker runs), each with an unused token, written to `tokens_file`."""
    import django

    django.setup()
    from io import StringIO

    from django.core.management import call_command
    from django.test import Client

    def command(*args: str) -> str:
        out = StringIO()
        call_command(*args, stdout=out, stderr=StringIO())
        return out.getvalue().strip()

    command("migrate", "--no-input", "--verbosity", "0")
    client = Client()
    tokens = {}
    for name in STORES:
        command("create_account", name)
        tokens[name] = command("issue_token", name, "--name", "bench")
    setup = command("issue_token", "three", "--name", "setup")
    for index in range(3):
        body = json.dumps({"url": f"http://127.0.0.1:9/hooks/{index}"})
        response = client.post(
            "/api/v1/webhooks",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {setup}",
        )
        if response.status_code != 201:
            raise RuntimeError(f"webhook: {response.status_code} {response.content!r}")
    tokens_file.write_text(json.dumps(tokens))


def store_child(tokens_file: Path, warmup: int, requests: int) -> None:
    """Under callgrind: each store's warm-up, then its measured requests on the parent's word
    (scripts/bench_instructions.py's protocol: ready, go, done, next)."""
    import gc

    import django

    django.setup()
    from django.test import Client

    tokens = json.loads(tokens_file.read_text())
    client = Client()
    for endpoint in STORES.values():
        token = tokens[endpoint.token]
        for _ in range(warmup):
            response = send(client, endpoint, token)
            if not 200 <= response.status_code < 300:
                raise RuntimeError(f"{endpoint.name}: {response.status_code}")
        gc.collect()
        print(f"ready {endpoint.name}", flush=True)
        if sys.stdin.readline().strip() != "go":
            return
        statuses = [send(client, endpoint, token).status_code for _ in range(requests)]
        print(f"done {endpoint.name}", flush=True)
        if sys.stdin.readline().strip() != "next":
            return
        if any(status != 200 for status in statuses):
            raise RuntimeError(f"{endpoint.name}: {statuses}")
    print("finished", flush=True)


def store_run(number: int, args: argparse.Namespace) -> dict[str, float]:
    directory = WORK / f"store-{number}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    env = {
        **environment(directory / "db.sqlite3", None),
        "CREDVAULT_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1:9",
        LAYOUT_VARIABLE: "x" * LAYOUT_STEP * (number - 1),
    }
    tokens_file = directory / "tokens.json"
    script = [sys.executable, "-m", "scripts.bench_webhooks"]
    seeded = subprocess.run(
        [*script, "--seed-store", str(tokens_file)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if seeded.returncode != 0:
        raise RuntimeError(f"seeding failed: {seeded.stderr[-2000:]}")
    valgrind = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={directory / 'callgrind.out'}",
        f"--log-file={directory / 'valgrind.log'}",
    ]
    child = [*script, "--store-child", str(tokens_file)]
    child += ["--requests", str(args.requests), "--warmup", str(args.warmup)]
    with (directory / "child.stderr").open("w") as stderr:
        process = subprocess.Popen(
            [*valgrind, *child],
            cwd=BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        pid = str(process.pid)
        try:
            while (words := (process.stdout.readline() or "ended").split())[0] != "finished":
                if words[0] == "ended":
                    tail = (directory / "child.stderr").read_text()[-2000:]
                    raise RuntimeError(f"the child ended: {tail}")
                if words[0] == "ready":
                    print(f"store run {number}: {words[1]}", file=sys.stderr, flush=True)
                    callgrind_control("-i", "on", pid)
                    callgrind_control("-z", pid)
                    process.stdin.write("go\n")
                elif words[0] == "done":
                    callgrind_control(f"--dump={words[1]}", pid)
                    callgrind_control("-i", "off", pid)
                    process.stdin.write("next\n")
                process.stdin.flush()
            process.stdin.close()
            process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    counted = {}
    for path in directory.glob("callgrind.out.*"):
        trigger, totals = dump_totals(path)
        if trigger.startswith("dump "):
            counted[trigger.removeprefix("dump ")] = totals / args.requests
    return counted


def measure_store(args: argparse.Namespace) -> dict:
    runs = [store_run(number + 1, args) for number in range(args.runs)]
    rows = [["store", *(f"run {i + 1}" for i in range(len(runs))), "mean", "spread"]]
    means = {}
    for name in STORES:
        values = [run[name] for run in runs]
        means[name] = statistics.mean(values)
        rows.append(
            [name, *(f"{v:,.0f}" for v in values), f"{means[name]:,.0f}", f"{spread(values):.2%}"]
        )
    more = means["three"] / means["none"] - 1
    print(f"\n1. store, instructions per request (Ir), {args.requests} requests, {args.runs} runs")
    print(table(rows))
    met = verdict(more <= STORE_TARGET)
    print(f"three endpoints against none: {more:+.2%} (target at most +5%): {met}")
    return {"store": {"runs": runs, "mean": means, "more": more}}


# --- the live figures: a receiver, a loop that raises events, the worker -----------------------


async def receive(port: int, out: Path) -> None:
    """Answer every POST with 200 at once; note `webhook-id arrival` for each."""
    notes = out.open("a", buffering=1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                arrived = time.time()
                headers = dict(
                    line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:] if line
                )
                headers = {k.lower(): v for k, v in headers.items()}
                await reader.readexactly(int(headers.get("content-length", "0")))
                notes.write(f"{headers.get('webhook-id', '-')} {arrived:.6f}\n")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def seed_endpoint(url: str) -> None:
    """Print the id of a new account's endpoint at `url` (every type) and the account's id."""
    import django

    django.setup()
    from services.accounts import create_account
    from services.audit import Actor
    from services.webhooks.endpoints import create_endpoint

    account = create_account(name="hooks")
    made = create_endpoint(actor=Actor.command(account.pk), url=url)
    print(made.endpoint.id, account.pk)


def raise_events(account_id: int, rate: float, count: int, out: Path) -> None:
    """Raise `count` events of the account at `rate` a second (0: as fast as it can), each
    committed on its own; note `event-id commit-time` for each."""
    import django

    django.setup()
    from django.db import transaction

    from services.webhooks import events

    notes = out.open("w", buffering=1)
    started = time.monotonic()
    for index in range(count):
        if rate:
            time.sleep(max(0.0, started + index / rate - time.monotonic()))
        with transaction.atomic():
            event = events.raise_event(
                account_id=account_id,
                type=events.CONNECTION_REPLACED,
                data={"service": f"svc-{index % 50}", "keyType": "api_key"},
            )
        notes.write(f"{event} {time.time():.6f}\n")


def queue_events(account_id: int, count: int) -> None:
    """Raise `count` events of the account, a hundred to a transaction (no worker runs)."""
    import django

    django.setup()
    from django.db import transaction

    from services.webhooks import events

    for start in range(0, count, 100):
        with transaction.atomic():
            for index in range(start, min(count, start + 100)):
                events.raise_event(
                    account_id=account_id,
                    type=events.CONNECTION_REPLACED,
                    data={"service": f"svc-{index % 50}", "keyType": "api_key"},
                )


class Live:
    """A fresh database with one account and its endpoint at `url`, and the processes."""

    def __init__(self, args: argparse.Namespace, name: str, url: str) -> None:
        self.directory = WORK / name
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True)
        if args.database == "postgres":
            fresh_postgres(POSTGRES)
            database = POSTGRES
        else:
            database = f"sqlite:///{self.directory / 'db.sqlite3'}"
        self.env = server_env(
            database,
            DJANGO_SETTINGS_MODULE="credvault.settings",
            CREDVAULT_ENV_FILE="",
            CREDVAULT_WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
        )
        manage(self.env, "migrate", "--no-input", "--verbosity", "0")
        seeded = self.script("--seed-endpoint", url)
        self.endpoint_id, account = seeded.split()
        self.account_id = int(account)
        self.processes: list[subprocess.Popen] = []

    def script(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "scripts.bench_webhooks", *args],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]}: {result.stderr[-2000:]}")
        return result.stdout.strip()

    def start(self, *command: str) -> subprocess.Popen:
        process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(self.directory / f"{len(self.processes)}.stderr").open("w"),
        )
        self.processes.append(process)
        return process

    def receiver(self, port: int, out: Path) -> None:
        script = [sys.executable, "-m", "scripts.bench_webhooks"]
        self.start(*script, "--receiver", str(port), str(out))
        deadline = time.monotonic() + 30
        while not listening(port):
            if time.monotonic() > deadline:
                raise RuntimeError("the receiver did not start")
            time.sleep(0.05)

    def worker(self) -> subprocess.Popen:
        return self.start(sys.executable, "manage.py", "deliver_webhooks")

    def raiser(self, rate: float, count: int, out: Path) -> subprocess.Popen:
        arguments = ["--raise", str(self.account_id), str(rate), str(count), str(out)]
        return self.start(sys.executable, "-m", "scripts.bench_webhooks", *arguments)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def notes_of(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    pairs = (line.split() for line in path.read_text().splitlines())
    return {pair[0]: float(pair[1]) for pair in pairs if len(pair) == 2}


def wait_for(path: Path, count: int, seconds: float) -> dict[str, float]:
    deadline = time.monotonic() + seconds
    while len(notes := notes_of(path)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return notes


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure_latency(args: argparse.Namespace) -> dict:
    port = free_port()
    live = Live(args, "latency", f"http://127.0.0.1:{port}/hooks")
    arrived_file, committed_file = live.directory / "arrived", live.directory / "committed"
    count = int(args.rate * args.seconds)
    try:
        live.receiver(port, arrived_file)
        live.worker()
        time.sleep(3)  # the worker's start-up is not the events' wait
        raiser = live.raiser(args.rate, count, committed_file)
        raiser.wait(args.seconds * 4 + 60)
        arrived = wait_for(arrived_file, count, 30)
    finally:
        live.stop()
    committed = notes_of(committed_file)
    waits = [arrived[i] - committed[i] for i in committed if i in arrived]
    took = max(committed.values()) - min(committed.values())
    p50, p99 = percentile(waits, 0.5), percentile(waits, 0.99)
    print(f"\n2. commit to receiver, {len(committed)} events raised in {took:.1f} s", end=" ")
    print(f"({args.database})")
    print(f"arrived {len(waits)} of {len(committed)}; max {max(waits):.3f} s")
    print(f"p50 {p50:.3f} s (target at most {P50_TARGET} s): {verdict(p50 <= P50_TARGET)}")
    print(f"p99 {p99:.3f} s (target at most {P99_TARGET} s): {verdict(p99 <= P99_TARGET)}")
    return {"latency": {"events": len(committed), "arrived": len(waits), "p50": p50, "p99": p99}}


def measure_drain(args: argparse.Namespace) -> dict:
    port = free_port()
    live = Live(args, "drain", f"http://127.0.0.1:{port}/hooks")
    arrived_file = live.directory / "arrived"
    try:
        queued_at = time.monotonic()
        live.script("--queue", str(live.account_id), str(args.events))
        queued = time.monotonic() - queued_at
        live.receiver(port, arrived_file)
        started = time.time()
        worker = live.worker()
        arrived = wait_for(arrived_file, args.events, args.events / 20 + 60)
        cpu = cpu_seconds(worker.pid)
    finally:
        live.stop()
    first, last = min(arrived.values()), max(arrived.values())
    rate = (len(arrived) - 1) / (last - first)
    print(f"\n3. one worker drains {args.events:,} queued events ({args.database})")
    print(f"queued in {queued:.1f} s; first delivery {first - started:.1f} s after the start")
    print(f"delivered {len(arrived):,} in {last - first:.1f} s: {rate:.0f} a second")
    print(f"(target at least {DRAIN_TARGET:.0f} a second): {verdict(rate >= DRAIN_TARGET)}")
    print(
        f"the worker's CPU: {cpu:.1f} s, {cpu / len(arrived) * 1000:.2f} ms a delivery with its "
        f"start-up (its own ceiling {len(arrived) / cpu:.0f} a second, PostgreSQL's aside)"
    )
    print(f"load average meanwhile: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    figures = {"events": len(arrived), "seconds": last - first, "rate": rate, "cpu": cpu}
    return {"drain": figures}


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure_dead(args: argparse.Namespace) -> dict:
    live = Live(args, "dead", f"http://127.0.0.1:{free_port()}/hooks")  # nothing listens there
    count = int(args.rate * args.seconds)
    samples: list[tuple[float, int]] = []
    try:
        worker = live.worker()
        time.sleep(3)
        raiser = live.raiser(args.rate, count, live.directory / "committed")
        started = time.monotonic()
        while raiser.poll() is None:
            samples.append((time.monotonic() - started, rss(worker.pid)))
            time.sleep(1)
        backlog = live.script("--backlog")
    finally:
        live.stop()
    quarter = max(1, len(samples) // 4)
    second = statistics.median(size for _, size in samples[quarter : 2 * quarter])
    last = statistics.median(size for _, size in samples[-quarter:])
    mib = 1024 * 1024
    print(f"\n4. a backlog to a dead endpoint, {count} events at {args.rate}/s ({args.database})")
    print("worker RSS (MiB) each " + f"{max(1, len(samples) // 10)} s: ", end="")
    print(" ".join(f"{size / mib:.1f}" for _, size in samples[:: max(1, len(samples) // 10)]))
    print(f"backlog at the end: {backlog}")
    grown = last - second
    print(
        f"second quarter {second / mib:.1f} MiB, last quarter {last / mib:.1f} MiB: "
        f"{grown / mib:+.2f} MiB (target within 2 MiB): {verdict(grown <= RSS_SLACK)}"
    )
    return {"dead": {"samples": samples, "grown": grown, "backlog": backlog}}


def backlog() -> None:
    """Print the pending deliveries and the attempts made (for `dead`)."""
    import django

    django.setup()
    from services.models import DeliveryState, WebhookAttempt, WebhookDelivery

    pending = WebhookDelivery.objects.filter(state=DeliveryState.PENDING).count()
    print(f"{pending} pending, {WebhookAttempt.objects.count()} attempts made")


FIGURES = {
    "store": measure_store,
    "latency": measure_latency,
    "drain": measure_drain,
    "dead": measure_dead,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("figures", nargs="*", help=f"of {', '.join(FIGURES)} (default: all)")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--requests", type=int, default=20, help="store: measured, per account")
    parser.add_argument("--warmup", type=int, default=10, help="store: requests before")
    parser.add_argument("--runs", type=int, default=3, help="store: whole runs, for the spread")
    parser.add_argument("--rate", type=float, default=50.0, help="latency, dead: events a second")
    parser.add_argument("--seconds", type=float, default=30.0, help="latency, dead: how long")
    parser.add_argument("--events", type=int, default=10_000, help="drain: events queued")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--seed-store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--store-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seed-endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--raise", nargs=4, dest="raise_", help=argparse.SUPPRESS)
    parser.add_argument("--receiver", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--queue", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--backlog", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed_store:
        seed_store(args.seed_store)
    elif args.store_child:
        store_child(args.store_child, args.warmup, args.requests)
    elif args.seed_endpoint:
        seed_endpoint(args.seed_endpoint)
    elif args.raise_:
        account, rate, count, out = args.raise_
        raise_events(int(account), float(rate), int(count), Path(out))
    elif args.receiver:
        asyncio.run(receive(int(args.receiver[0]), Path(args.receiver[1])))
    elif args.queue:
        queue_events(*args.queue)
    elif args.backlog:
        backlog()
    else:
        os.environ.pop("DJANGO_SETTINGS_MODULE", None)
        names = args.figures or list(FIGURES)
        if unknown := set(names) - set(FIGURES):
            parser.error(f"no figure {', '.join(sorted(unknown))}")
        results: dict = {}
        for name in names:
            results.update(FIGURES[name](args))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
