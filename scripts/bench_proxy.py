"""Benchmark of the brokered call: `python -m scripts.bench_proxy` (part of `make bench`).

An upstream on 127.0.0.1 (a small asyncio HTTP/1.1 server with keep-alive, in its own
process, answering a 40-byte JSON body, or at `/stream` a chunked Server-Sent Events stream)
stands in for GitHub. In interleaved rounds at 16 connections, the same GET goes:

- `direct`: straight to the upstream;
- `proxy`: through credvault, `GET /api/v1/agent/proxy/github/user` with an agent token
  (authentication, the grant and the set read in one statement, decryption, placement, the
  pooled outbound client, redaction, the audit event);
- `naive`: through a bench-only Django view in the same gunicorn that forwards with
  `requests.get` and no pooling (a new connection per call) and checks nothing;
- `mcp`: through credvault's MCP server, the `proxy` call as an MCP client makes it: one
  `POST /mcp` per call with the same agent token (`MCP-Protocol-Version: 2025-11-25`; the server
  holds no session, so no `initialize`), a JSON-RPC `tools/call` of `call_api` with the GET of
  `/user` on `github`, each call with an id of its own. Every answer is read: a JSON-RPC error
  or a tool error (`isError`) counts as an error, a brokered call's status other than 2xx as a
  non-2xx, as the proxy route's own status would.

Prints each one's rps, p50, p99 and the workers' CPU per call (medians of the rounds),
credvault's p50 over the direct call's, and its rps and CPU per call against the naive
forwarder's, beside the targets: at most 2 ms added at p50, at least the naive forwarder's rps
and at most its CPU per call; then the MCP call's CPU per call over the proxy route's, beside
the target of at most MCP_CPU_FACTOR times.

Then streams, direct and through credvault in interleaved rounds, of STREAM_EVENTS events
STREAM_GAP_MS apart. The upstream stamps each event with the moment it writes it
(`time.monotonic_ns()` in its data line: CLOCK_MONOTONIC is one clock for every process on the
machine) and the client notes the moment each event arrives: the one less the other is the
event's latency, how long it took to pass whatever the call's start cost. The targets are judged
with CONCURRENT_STREAMS streams in flight, as agents that start theirs independently keep
them: a new stream every stream's length / CONCURRENT_STREAMS, STREAM_STARTS in all, and only
those started once CONCURRENT_STREAMS were open are counted (the first ones are the ramp). Of
them: each event's latency direct and through credvault (p50 over the streams), and the most
credvault adds to an event's, beside the target of each chunk within 5 ms of the direct one
(event 0's is the first byte's passage once the upstream sent it); and the time to first byte,
the first event's arrival after the request was sent, beside the target of at most 5 ms added.
Two more figures of the time to first byte, beside the machine's cores, say what a start costs:
CONCURRENT_STREAMS streams started in the same millisecond (each waits for the others' start
on the cores: a burst, not the target's measure), and as many run one after another (credvault's
own added time with nothing queueing). Last, one worker holding MEMORY_STREAMS streams at once:
its RSS before and with them all open, per stream, beside the target of 64 KiB.

Consent: in the same rounds, `approved`, the `proxy` call made by the agent `approver`, whose
grant's approve rule covers GET /user, under its standing "allow for 30 minutes" (asked once and
decided by `manage.py shell` before the rounds): its workers' CPU per call over the `proxy`
call's, beside the target of at most APPROVED_CPU_FACTOR. Then one worker (room for
HELD_CALLS connections) holding HELD_CALLS repeats of a POST that waits for a decision
(`Prefer: wait=120`): its RSS before and once the worker is quiet with them all held, per call,
beside the target of 64 KiB; its open connections to the database file meanwhile; the
latencies of /healthz, the account's service list and an agent read answered meanwhile; and,
once another process (`manage.py shell`) denied the approval, how long after its command ended
the last held call was answered, with every answer's code. `--consent-only` runs just these,
the rounds of `proxy` and `approved` alone. A measurement; nothing is asserted.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from scripts.bench import WORK as LOAD_SCRIPTS
from scripts.bench import Check, Endpoint, Result, load, measure, production_workers
from tests.support.harness import (
    BASE_DIR,
    Gunicorn,
    free_port,
    listening,
    manage,
    request,
    server_env,
)

WORK = BASE_DIR / "var" / "bench-proxy"
ANSWER = b'{"login":"octocat","id":1,"type":"User"}'
ADDED_P50_MS = 2.0
PROXY_PATH = "/api/v1/agent/proxy/github"
# The streams: events of an LLM's answer, one chunk each.
STREAM_EVENTS = 10
STREAM_GAP_MS = 50
# Stamped with the upstream's time.monotonic_ns() as it writes the event.
STREAM_EVENT = b'data: {"choices":[{"delta":{"content":"token"},"index":0}],"sent_ns":%d}\n\n'
CONCURRENT_STREAMS = 16
# A stream's length, from its first event to its last (s).
STREAM_LENGTH_S = (STREAM_EVENTS - 1) * STREAM_GAP_MS / 1000
# Streams started in a round of streams in flight: the ramp, then two streams' lengths counted.
STREAM_STARTS = 3 * CONCURRENT_STREAMS
STREAM_ADDED_MS = 5.0
# One worker holding this many streams at once, for its memory per stream.
MEMORY_STREAMS = 200
MEMORY_PER_STREAM_KIB = 64
# The `mcp` case: the proxy call as a `tools/call` of `call_api`, %d its JSON-RPC id.
MCP_PATH = "/mcp"
MCP_CALL = (
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"call_api",'
    '"arguments":{"service":"github","method":"GET","path":"/user"}}}'
)
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
# Its workers' CPU per call, at most this many times the proxy route's.
MCP_CPU_FACTOR = 1.3


# --- the upstream ---------------------------------------------------------------------------


async def _serve(port: int) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(ANSWER)).encode() + b"\r\n\r\n"
    )

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                for line in headers.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        await reader.readexactly(int(line.split(b":", 1)[1]))
                target = headers.split(b" ", 2)[1]
                if target.startswith(b"/stream"):
                    await _stream(writer, parse_qs(urlsplit(target.decode()).query))
                    continue
                writer.write(head + ANSWER)
                await writer.drain()
                if b"\r\nconnection: close" in headers.lower():
                    break  # the Python load generator reads each answer to the end
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(client, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


async def _stream(writer: asyncio.StreamWriter, query: dict[str, list[str]]) -> None:
    """A chunked SSE stream: `events` events `gap_ms` apart, each its own chunk, stamped with
    the moment it is written."""
    events = int(query.get("events", [STREAM_EVENTS])[0])
    gap = int(query.get("gap_ms", [STREAM_GAP_MS])[0]) / 1000
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    for number in range(events):
        if number:
            await asyncio.sleep(gap)
        event = STREAM_EVENT % time.monotonic_ns()
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def start_upstream() -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "scripts.bench_proxy", "--upstream", str(port)], cwd=BASE_DIR
    )
    deadline = time.monotonic() + 10
    while not listening(port):
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError("the upstream did not start")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}"


# --- the set-up -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """The upstream's URL, the server's environment (a fresh SQLite database, migrated, with the
    account `bench`, its token and its agent `bot` granted github), and the agent's token."""

    env: dict[str, str]
    upstream_url: str
    account_token: str
    agent: str
    approver: str


@contextmanager
def bench_setup() -> Iterator[Setup]:
    """The upstream running and the database ready, for as long as the block runs."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    LOAD_SCRIPTS.mkdir(parents=True, exist_ok=True)  # wrk's scripts go there
    upstream, upstream_url = start_upstream()
    try:
        env = server_env(
            f"sqlite:///{WORK / 'proxy.sqlite3'}",
            DJANGO_SETTINGS_MODULE="scripts.bench_settings",
            CREDVAULT_RATE_LIMIT="100000000/min",
            CREDVAULT_PROXY_RATE_LIMIT="100000000/min",
            # Every call of the one agent token in flight at once: the load is the point here.
            CREDVAULT_PROXY_MAX_CONCURRENT="100000",
            CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": upstream_url}),
            CREDVAULT_BENCH_UPSTREAM=upstream_url,
        )
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "create_account", "bench")
        account_token = manage(env, "issue_token", "bench")
        manage(env, "create_agent", "bench", "bot", "--service", "github")
        agent = manage(env, "issue_agent_token", "bench", "bot")
        manage(env, "create_agent", "bench", APPROVER, "--service", "github", "--read")
        manage(env, "shell", "-c", APPROVE_RULES_SET)
        approver = manage(env, "issue_agent_token", "bench", APPROVER)
        yield Setup(env, upstream_url, account_token, agent, approver)
    finally:
        upstream.terminate()
        upstream.wait(10)


@contextmanager
def serving(setup: Setup, workers: int) -> Iterator[Gunicorn]:
    """credvault under gunicorn with `workers` workers, the account's github set stored."""
    with Gunicorn(setup.env, workers=workers, log=WORK / "gunicorn.log") as server:
        body = {"service": "github", "credentials": [{"keyName": "api_key", "value": "ghp_x"}]}
        status, _, _ = request(
            "PUT", f"{server.url}/api/v1/services/credentials", token=setup.account_token, body=body
        )
        if status != 201:
            raise RuntimeError(f"storing the github set failed with {status}")
        yield server


# --- streams --------------------------------------------------------------------------------


# A stream as the client saw it: the ms to its first event, and each event's latency (ms).
Stream = tuple[float, list[float]]


async def _read_stream(url: str, path: str, token: str | None) -> Stream:
    """One streamed GET: the ms from sending the request to the arrival of the first event, and
    each event's latency, the ms from the upstream's stamp to its arrival."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    started = time.monotonic_ns()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n{authorization}\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    first = 0.0
    latencies: list[float] = []
    body = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        if size == 0:
            break
        body += (await reader.readexactly(size + 2))[:-2]
        arrived = time.monotonic_ns()
        *events, body = body.split(b"\n\n")  # a chunk may hold more or less than an event
        for event in events:
            if not latencies:
                first = (arrived - started) / 1e6
            sent = json.loads(event.removeprefix(b"data: "))["sent_ns"]
            latencies.append((arrived - sent) / 1e6)
    writer.close()
    return first, latencies


async def _together(url: str, path: str, token: str | None) -> list[Stream]:
    return await asyncio.gather(
        *(_read_stream(url, path, token) for _ in range(CONCURRENT_STREAMS))
    )


async def _in_flight(url: str, path: str, token: str | None) -> list[Stream]:
    """STREAM_STARTS streams, a new one every stream's length / CONCURRENT_STREAMS, so that
    CONCURRENT_STREAMS are open at once: those started once as many were open."""
    spacing = STREAM_LENGTH_S / CONCURRENT_STREAMS

    async def started_after(number: int) -> Stream:
        await asyncio.sleep(number * spacing)
        return await _read_stream(url, path, token)

    streams = await asyncio.gather(*(started_after(n) for n in range(STREAM_STARTS)))
    return streams[CONCURRENT_STREAMS:]


async def _one_after_another(url: str, path: str, token: str | None) -> list[float]:
    return [(await _read_stream(url, path, token))[0] for _ in range(CONCURRENT_STREAMS)]


def stream_latencies(url: str, path: str, token: str | None) -> tuple[float, list[float]]:
    """Streams in flight, CONCURRENT_STREAMS at once: the p50 over them of the first event's
    arrival after the request (ms), and of each event's latency (ms)."""
    streams = asyncio.run(_in_flight(url, path, token))
    complete = [latencies for _, latencies in streams if len(latencies) == STREAM_EVENTS]
    if len(complete) < len(streams):
        raise RuntimeError(f"{len(streams) - len(complete)} streams ended early")
    first = statistics.median(first for first, _ in streams)
    return first, [
        statistics.median(stream[n] for stream in complete) for n in range(STREAM_EVENTS)
    ]


def first_event_together(url: str, path: str, token: str | None) -> float:
    """CONCURRENT_STREAMS streams started at once: the p50 over them of the first event's
    arrival after the request (ms)."""
    return statistics.median(first for first, _ in asyncio.run(_together(url, path, token)))


def first_event_alone(url: str, path: str, token: str | None) -> float:
    """CONCURRENT_STREAMS streams one after another: the p50 over them of the first event's
    arrival after the request (ms)."""
    return statistics.median(asyncio.run(_one_after_another(url, path, token)))


async def _hold_streams(
    url: str, path: str, token: str, worker: int, count: int
) -> tuple[int, int]:
    """`count` streams at once through one worker: its RSS (KiB) as the last of them received
    its first event, and the most it reached meanwhile (VmHWM)."""
    opened = asyncio.Event()
    first_events = 0

    async def one() -> None:
        nonlocal first_events
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        await reader.readuntil(b"\n\n")  # the head, then the first event
        first_events += 1
        if first_events == count:
            opened.set()
        while await reader.read(65536):
            pass
        writer.close()

    tasks = [asyncio.create_task(one()) for _ in range(count)]
    await asyncio.wait_for(opened.wait(), 60)
    held = memory_kib(worker, "VmRSS")
    await asyncio.gather(*tasks)
    return held, memory_kib(worker, "VmHWM")


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def memory_per_stream(env: dict[str, str], agent: str) -> tuple[int, int, int]:
    """One worker's RSS (KiB) after a warm-up, with MEMORY_STREAMS streams open, and at its
    peak."""
    slow = PROXY_PATH + "/stream?events=8&gap_ms=1000"
    with Gunicorn(env, workers=1, log=WORK / "gunicorn-memory.log") as server:
        [worker] = server.worker_pids()
        # A few streams first: imports, the connection pool, the database connection.
        asyncio.run(_hold_streams(server.url, slow, agent, worker, 4))
        before = memory_kib(worker, "VmRSS")
        held, peak = asyncio.run(_hold_streams(server.url, slow, agent, worker, MEMORY_STREAMS))
    return before, held, peak


# --- consent: a standing approval, and calls held for a decision ----------------------------

# An agent like `bot` whose grant asks: GET /user and POST /repos... need an approval.
APPROVER = "approver"
APPROVE_RULES_SET = (
    "from services.models import Grant; Grant.objects.filter(agent__name='approver').update("
    "approve=[{'methods': ['GET'], 'paths': ['/user']}, "
    "{'methods': ['POST'], 'paths': ['/repos']}])"
)
# A call under a standing "allow for 30 minutes": its workers' CPU per call, at most this many
# times the same call's without a rule.
APPROVED_CPU_FACTOR = 1.10
# Calls held by `Prefer: wait` in one worker, and what each may cost it.
HELD_CALLS = 1000
HELD_PER_CALL_KIB = 64
HELD_PATH = PROXY_PATH + "/repos/o/r/issues"
HELD_BODY = json.dumps({"title": "held"}).encode()  # as `request` sends its first call
# The requests answered beside the held calls, each PROBES times.
PROBES = 20
DECIDE = (
    "from services.consent.decisions import Decider, {function}; "
    "from services.models import Approval; a = Approval.objects.get(id='{approval_id}'); "
    "{function}(decider=Decider(account_id=a.account_id, request_id='bench', "
    "token_prefix='bench'), approval_id=a.id{more})"
)


def decide(env: dict[str, str], approval_id: str, *, allow_minutes: int | None) -> None:
    """A decision made by another process (`manage.py shell`), as an operator's would be."""
    function = "deny" if allow_minutes is None else "approve_call"
    more = "" if allow_minutes is None else f", allow_for_minutes={allow_minutes}"
    code = DECIDE.format(function=function, approval_id=approval_id, more=more)
    manage(env, "shell", "-c", code)


def allow_for_half_an_hour(server: Gunicorn, setup: Setup) -> None:
    """The approver's GET /user asked once and allowed for 30 minutes: a standing approval."""
    url = server.url + PROXY_PATH + "/user"
    status, _, body = request("GET", url, token=setup.approver)
    if status != 403:
        raise RuntimeError(f"the approver's call answered {status}: {body[:300]!r}")
    decide(setup.env, json.loads(body)["approvalId"], allow_minutes=30)
    status, _, body = request("GET", url, token=setup.approver)
    if status != 200:
        raise RuntimeError(f"the approved call answered {status}: {body[:300]!r}")


@dataclass(frozen=True)
class Held:
    """One worker holding HELD_CALLS calls: its RSS (KiB) before and while they are held, its
    open connections to the database file meanwhile, the latencies (ms) of the other requests
    it answered meanwhile, and how long the last of the calls took to be answered after the
    decision's command ended (s)."""

    before: int
    held: int
    database_files: int
    probes: dict[str, list[float]]
    released_s: float
    answers: dict[str, int]


def _worker_cpu(worker: int) -> float:
    from scripts.bench import cpu_seconds

    return cpu_seconds([worker])


def _open_database_files(worker: int, name: str) -> int:
    count = 0
    for fd in Path(f"/proc/{worker}/fd").iterdir():
        try:
            count += os.readlink(fd).endswith(name)
        except OSError:
            continue
    return count


async def _held_call(url: str, token: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        f"POST {HELD_PATH} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(HELD_BODY)}\r\n"
        "Prefer: wait=120\r\nConnection: close\r\n\r\n".encode()
        + HELD_BODY
    )
    await writer.drain()
    return reader, writer


async def _answer(reader: asyncio.StreamReader) -> str:
    """The held call's problem code, and whether it said it waited (`+applied`)."""
    answer = await reader.read()
    head, _, body = answer.partition(b"\r\n\r\n")
    applied = b"\r\npreference-applied: wait=" in head.lower()
    try:
        code = json.loads(body).get("code", "?")
    except ValueError:
        code = head.split(b"\r\n", 1)[0].decode(errors="replace")
    return code + ("+applied" if applied else "")


def _probe(server: Gunicorn, setup: Setup) -> dict[str, list[float]]:
    """Each of the other requests PROBES times, one after another: its latencies (ms)."""
    probes = {
        "/healthz": (server.url + "/healthz", None),
        "service list": (server.url + "/api/v1/services", setup.account_token),
        "agent read": (server.url + "/api/v1/agent/credentials/github", setup.approver),
    }
    latencies: dict[str, list[float]] = {name: [] for name in probes}
    for _ in range(PROBES):
        for name, (url, token) in probes.items():
            started = time.monotonic()
            status, _, _ = request("GET", url, token=token)
            latencies[name].append((time.monotonic() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"{name} answered {status} while calls were held")
    return latencies


async def _hold(server: Gunicorn, setup: Setup, worker: int, approval_id: str) -> Held:
    before = memory_kib(worker, "VmRSS")
    calls = [await _held_call(server.url, setup.approver) for _ in range(HELD_CALLS)]
    # Held once the worker is quiet: every call has reached its wait.
    deadline, last = time.monotonic() + 120, _worker_cpu(worker)
    while time.monotonic() < deadline:
        await asyncio.sleep(1)
        now = _worker_cpu(worker)
        if now - last < 0.03:
            break
        last = now
    held = memory_kib(worker, "VmRSS")
    database_files = _open_database_files(worker, "proxy.sqlite3")
    probes = await asyncio.to_thread(_probe, server, setup)
    answers = [asyncio.create_task(_answer(reader)) for reader, _ in calls]
    await asyncio.to_thread(decide, setup.env, approval_id, allow_minutes=None)
    decided = time.monotonic()
    codes = await asyncio.gather(*answers)
    released = time.monotonic() - decided
    for _, writer in calls:
        writer.close()
    counted: dict[str, int] = {}
    for code in codes:
        counted[code] = counted.get(code, 0) + 1
    return Held(before, held, database_files, probes, released, counted)


def hold_for_a_decision(setup: Setup) -> Held:
    """One worker (room for HELD_CALLS connections) holding HELD_CALLS repeats of one call that
    waits for a decision; then a decision by another process releases them all."""
    env = {**setup.env, "GUNICORN_CMD_ARGS": f"--worker-connections {HELD_CALLS + 100}"}
    with Gunicorn(env, workers=1, log=WORK / "gunicorn-held.log") as server:
        [worker] = server.worker_pids()
        url = server.url + HELD_PATH
        status, _, body = request("POST", url, token=setup.approver, body={"title": "held"})
        if status != 403:
            raise RuntimeError(f"the held call asked with {status}: {body[:300]!r}")
        approval_id = json.loads(body)["approvalId"]
        # A few calls held a second first: imports, the waiting room, the database connection.
        for _ in range(4):
            request(
                "POST",
                url,
                token=setup.approver,
                body={"title": "held"},
                headers={"Prefer": "wait=1"},
            )
        _probe(server, setup)
        return asyncio.run(_hold(server, setup, worker, approval_id))


def print_consent(summary: dict[str, Result], held: Held | None) -> None:
    approved = summary["approved"].cpu_ms / summary["proxy"].cpu_ms
    print(
        f"\na call under a standing approval (allowed for 30 minutes): its CPU per call is "
        f"{approved:.3f}x the same call's without an approve rule (target <= "
        f"{APPROVED_CPU_FACTOR}x: {_met(approved <= APPROVED_CPU_FACTOR)})"
    )
    if held is None:
        return
    per_call = (held.held - held.before) / HELD_CALLS
    print(
        f"one worker, {HELD_CALLS} calls held by Prefer: wait: RSS {held.before / 1024:.1f} MiB "
        f"before, {held.held / 1024:.1f} MiB with them held: {per_call:.1f} KiB a call (target "
        f"<= {HELD_PER_CALL_KIB} KiB: {_met(per_call <= HELD_PER_CALL_KIB)}); the worker's open "
        f"database connections meanwhile: {held.database_files}"
    )
    for name, latencies in held.probes.items():
        print(
            f"  {name} while held: p50 {statistics.median(latencies):.2f} ms, max "
            f"{max(latencies):.2f} ms ({len(latencies)} requests)"
        )
    answers = ", ".join(f"{count} {code}" for code, count in sorted(held.answers.items()))
    print(
        f"  denied by another process (manage.py shell): the last answered {held.released_s:.2f} "
        f"s after its command ended ({answers})"
    )


# --- MCP calls ------------------------------------------------------------------------------


def mcp_outcome(status: int, body: bytes) -> str:
    """One MCP call's outcome: `ok`; `non_2xx`, an HTTP status or the brokered call's status
    other than 2xx; `error`, a JSON-RPC error, a tool error (`isError`) or no JSON-RPC answer."""
    if not 200 <= status < 300:
        return "non_2xx"
    try:
        result = json.loads(body)["result"]
        if result["isError"] is not False:
            return "error"
        upstream = result["structuredContent"]["status"]
    except (ValueError, KeyError, TypeError):
        return "error"
    return "ok" if 200 <= upstream < 300 else "non_2xx"


# `mcp_outcome` in Lua, for wrk: the body of `outcome(status, body)` (`scripts.bench.Check`).
MCP_OUTCOME_LUA = """\
  if status < 200 or status > 299 then
    return "non_2xx"
  elseif not body:find('"isError":false', 1, true) then
    return "error"
  end
  local upstream = tonumber(body:match('"structuredContent":{"status":(%d+)'))
  if not upstream then
    return "error"
  elseif upstream < 200 or upstream > 299 then
    return "non_2xx"
  end
  return "ok"
"""


def mcp_endpoint(token: str) -> Endpoint:
    """The MCP call as `scripts.bench`'s load generators send it: each call with the next id,
    every answer read as `mcp_outcome` reads it."""
    return Endpoint(
        "mcp",
        "POST",
        MCP_PATH,
        token=token,
        headers=MCP_HEADERS,
        numbered_body=MCP_CALL,
        check=Check(mcp_outcome, MCP_OUTCOME_LUA),
    )


def check_mcp(server: Gunicorn, token: str) -> None:
    """One MCP call before the load: 200, no tool error, the brokered call's status 200."""
    status, _, answer = request(
        "POST",
        server.url + MCP_PATH,
        token=token,
        body=json.loads(MCP_CALL % 1),
        headers=MCP_HEADERS,
    )
    result = json.loads(answer).get("result", {}) if status == 200 else {}
    if (
        result.get("isError") is not False
        or result.get("structuredContent", {}).get("status") != 200
    ):
        raise RuntimeError(f"the MCP call answered {status}: {answer[:500]!r}")


# --- the run --------------------------------------------------------------------------------


def median_result(results: list[Result]) -> Result:
    return Result(
        requests=sum(r.requests for r in results),
        rps=statistics.median(r.rps for r in results),
        p50=statistics.median(r.p50 for r in results),
        p99=statistics.median(r.p99 for r in results),
        non_2xx=sum(r.non_2xx for r in results),
        errors=sum(r.errors for r in results),
        cpu_ms=statistics.median(r.cpu_ms for r in results),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--consent-only",
        action="store_true",
        help="Only the consent figures: the proxy call with and without a standing approval, "
        "and the calls held for a decision.",
    )
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        asyncio.run(_serve(args.upstream))
        return 0

    if args.consent_only:
        return consent_only(args)
    with bench_setup() as setup:
        agent, upstream_url = setup.agent, setup.upstream_url
        workers = production_workers()
        with serving(setup, workers) as server:
            direct = Endpoint("direct", "GET", "/user")
            cases = {
                "proxy": Endpoint("proxy", "GET", PROXY_PATH + "/user", token=agent),
                "naive": Endpoint("naive", "GET", "/bench/naive/user"),
                "mcp": mcp_endpoint(agent),
                "approved": Endpoint("approved", "GET", PROXY_PATH + "/user", token=setup.approver),
            }
            check_mcp(server, agent)
            allow_for_half_an_hour(server, setup)
            load(upstream_url, direct, args.connections, 1)  # warm up every worker and pool
            for endpoint in cases.values():
                load(server.url, endpoint, args.connections, 1)
            results: dict[str, list[Result]] = {"direct": [], **{name: [] for name in cases}}
            streams: dict[str, list[Stream]] = {"direct": [], "proxy": []}
            together: dict[str, list[float]] = {"direct": [], "proxy": []}
            alone: dict[str, list[float]] = {"direct": [], "proxy": []}
            stream_path = f"/stream?events={STREAM_EVENTS}&gap_ms={STREAM_GAP_MS}"
            one_event = f"/stream?events=1&gap_ms={STREAM_GAP_MS}"
            for _ in range(args.rounds):
                results["direct"].append(load(upstream_url, direct, args.connections, args.seconds))
                for name, endpoint in cases.items():
                    results[name].append(measure(server, endpoint, args.connections, args.seconds))
                streams["direct"].append(stream_latencies(upstream_url, stream_path, None))
                proxied = PROXY_PATH + stream_path
                streams["proxy"].append(stream_latencies(server.url, proxied, agent))
                together["direct"].append(first_event_together(upstream_url, one_event, None))
                one_proxied = PROXY_PATH + one_event
                together["proxy"].append(first_event_together(server.url, one_proxied, agent))
                alone["direct"].append(first_event_alone(upstream_url, one_event, None))
                alone["proxy"].append(first_event_alone(server.url, one_proxied, agent))
        memory = memory_per_stream(setup.env, agent)
        held = hold_for_a_decision(setup)

    print(
        f"proxy bench: {args.rounds} rounds of {args.seconds:.0f} s at {args.connections} "
        f"connections, {workers} gunicorn workers, SQLite; medians of the rounds"
    )
    print(
        f"{'case':>8} {'rps':>8} {'p50 ms':>8} {'p99 ms':>8} {'cpu ms/call':>12} "
        f"{'non-2xx':>8} {'errors':>7}"
    )
    summary = {name: median_result(rounds) for name, rounds in results.items()}
    for name, result in summary.items():
        cpu = f"{result.cpu_ms:12.2f}" if name != "direct" else f"{'-':>12}"
        print(
            f"{name:>8} {result.rps:8.0f} {result.p50:8.2f} {result.p99:8.2f} {cpu} "
            f"{result.non_2xx:8d} {result.errors:7d}"
        )
    added = summary["proxy"].p50 - summary["direct"].p50
    versus_naive = summary["proxy"].rps / summary["naive"].rps
    cpu_versus_naive = summary["proxy"].cpu_ms / summary["naive"].cpu_ms
    print(
        f"credvault adds {added:.2f} ms at p50 over the direct call (target <= {ADDED_P50_MS} ms: "
        f"{_met(added <= ADDED_P50_MS)}); its rps is {versus_naive:.2f}x the naive forwarder's "
        f"(target >= 1: {_met(versus_naive >= 1)}); its CPU per call {cpu_versus_naive:.2f}x "
        f"the naive forwarder's (target <= 1: {_met(cpu_versus_naive <= 1)})"
    )
    mcp_versus_proxy = summary["mcp"].cpu_ms / summary["proxy"].cpu_ms
    print(
        f"the MCP call's CPU per call is {mcp_versus_proxy:.2f}x the proxy route's (target <= "
        f"{MCP_CPU_FACTOR}x: {_met(mcp_versus_proxy <= MCP_CPU_FACTOR)})"
    )
    print_streams(streams, together, alone, memory)
    print_consent(summary, held)
    return 0


def consent_only(args: argparse.Namespace) -> int:
    """The proxy call with and without a standing approval in interleaved rounds, then the
    calls held for a decision."""
    with bench_setup() as setup:
        workers = production_workers()
        with serving(setup, workers) as server:
            allow_for_half_an_hour(server, setup)
            cases = {
                "proxy": Endpoint("proxy", "GET", PROXY_PATH + "/user", token=setup.agent),
                "approved": Endpoint("approved", "GET", PROXY_PATH + "/user", token=setup.approver),
            }
            for endpoint in cases.values():
                load(server.url, endpoint, args.connections, 1)
            results: dict[str, list[Result]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, endpoint in cases.items():
                    results[name].append(measure(server, endpoint, args.connections, args.seconds))
        held = None if args.rounds == 0 else hold_for_a_decision(setup)
    summary = {name: median_result(rounds) for name, rounds in results.items()}
    print(
        f"consent bench: {args.rounds} rounds of {args.seconds:.0f} s at {args.connections} "
        f"connections, {workers} gunicorn workers, SQLite; medians of the rounds"
    )
    for name, result in summary.items():
        print(
            f"{name:>8} {result.rps:8.0f} rps, p50 {result.p50:.2f} ms, {result.cpu_ms:.3f} ms "
            f"CPU a call, {result.non_2xx} non-2xx, {result.errors} errors"
        )
    print_consent(summary, held)
    return 0


def _met(met: bool) -> str:
    return "met" if met else "MISSED"


def print_streams(
    streams: dict[str, list[Stream]],
    together: dict[str, list[float]],
    alone: dict[str, list[float]],
    memory: tuple[int, int, int],
) -> None:
    """Each event's latency and the time to first event, direct and through credvault (medians
    of the rounds), and the worker's memory per stream."""
    event = {
        name: [statistics.median(r[1][n] for r in rounds) for n in range(STREAM_EVENTS)]
        for name, rounds in streams.items()
    }
    first = {name: statistics.median(r[0] for r in rounds) for name, rounds in streams.items()}
    first_together = {name: statistics.median(rounds) for name, rounds in together.items()}
    first_alone = {name: statistics.median(rounds) for name, rounds in alone.items()}
    print(
        f"\nstreams: {CONCURRENT_STREAMS} in flight, {STREAM_EVENTS} events {STREAM_GAP_MS} ms "
        "apart; each event's latency, from the upstream writing it to its arrival (ms; p50 of "
        "the streams, median of the rounds)"
    )
    print(f"{'event':>8} {'direct':>8} {'proxy':>8} {'added':>8}")
    for number in range(STREAM_EVENTS):
        direct, proxied = event["direct"][number], event["proxy"][number]
        print(f"{number:>8} {direct:8.2f} {proxied:8.2f} {proxied - direct:8.2f}")
    worst = max(p - d for p, d in zip(event["proxy"], event["direct"], strict=True))
    print(
        f"the most an event waits more through credvault: {worst:.2f} ms (target <= "
        f"{STREAM_ADDED_MS} ms: {_met(worst <= STREAM_ADDED_MS)})"
    )
    added = first["proxy"] - first["direct"]
    print(
        f"time to first event after the request, {CONCURRENT_STREAMS} in flight: direct "
        f"{first['direct']:.2f} ms, proxy {first['proxy']:.2f} ms, {added:.2f} ms more through "
        f"credvault (target <= {STREAM_ADDED_MS} ms: {_met(added <= STREAM_ADDED_MS)})"
    )
    for label, firsts in (
        (f"{CONCURRENT_STREAMS} started in the same millisecond", first_together),
        (f"{CONCURRENT_STREAMS} one after another", first_alone),
    ):
        print(
            f"  {label}: direct {firsts['direct']:.2f} ms, proxy {firsts['proxy']:.2f} ms, "
            f"{firsts['proxy'] - firsts['direct']:.2f} ms more ({os.cpu_count()} cores)"
        )
    before, held, peak = memory
    per_stream = (held - before) / MEMORY_STREAMS
    print(
        f"one worker, {MEMORY_STREAMS} streams at once: RSS {before / 1024:.1f} MiB before, "
        f"{held / 1024:.1f} MiB with them open (peak {peak / 1024:.1f} MiB): {per_stream:.1f} KiB "
        f"a stream (target <= {MEMORY_PER_STREAM_KIB} KiB: "
        f"{_met(per_stream <= MEMORY_PER_STREAM_KIB)})"
    )


if __name__ == "__main__":
    sys.exit(main())
