"""Benchmark of the brokered call: `python -m scripts.bench_proxy` (part of `make bench`).

An upstream on 127.0.0.1 (a small asyncio HTTP/1.1 server with keep-alive, in its own
process, answering a 40-byte JSON body) stands in for GitHub. In interleaved rounds at 16
connections, the same GET goes:

- `direct`: straight to the upstream;
- `proxy`: through credvault, `GET /api/v1/agent/proxy/github/user` with an agent token
  (authentication, the grant and the set read in one statement, decryption, placement, the
  pooled outbound client, redaction, the audit event);
- `naive`: through a bench-only Django view in the same gunicorn that forwards with
  `requests.get` and no pooling (a new connection per call) and checks nothing.

Prints each one's rps, p50 and p99 (medians of the rounds), credvault's p50 over the direct
call's, and its rps against the naive forwarder's, beside the issue's targets: at most 2 ms
added at p50, and more rps than the naive forwarder. A measurement; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time

from scripts.bench import WORK as LOAD_SCRIPTS
from scripts.bench import Endpoint, Result, load, production_workers
from scripts.harness import BASE_DIR, Gunicorn, free_port, listening, manage, request, server_env

WORK = BASE_DIR / "var" / "bench-proxy"
ANSWER = b'{"login":"octocat","id":1,"type":"User"}'
ADDED_P50_MS = 2.0


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


# --- the run --------------------------------------------------------------------------------


def median_result(results: list[Result]) -> Result:
    return Result(
        requests=sum(r.requests for r in results),
        rps=statistics.median(r.rps for r in results),
        p50=statistics.median(r.p50 for r in results),
        p99=statistics.median(r.p99 for r in results),
        non_2xx=sum(r.non_2xx for r in results),
        errors=sum(r.errors for r in results),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        asyncio.run(_serve(args.upstream))
        return 0

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
        workers = production_workers()
        with Gunicorn(env, workers=workers, log=WORK / "gunicorn.log") as server:
            body = {"service": "github", "credentials": [{"keyName": "api_key", "value": "ghp_x"}]}
            status, _, _ = request(
                "PUT", f"{server.url}/api/v1/services/credentials", token=account_token, body=body
            )
            if status != 201:
                raise RuntimeError(f"storing the github set failed with {status}")
            cases = {
                "direct": (upstream_url, Endpoint("direct", "GET", "/user")),
                "proxy": (
                    server.url,
                    Endpoint("proxy", "GET", "/api/v1/agent/proxy/github/user", token=agent),
                ),
                "naive": (server.url, Endpoint("naive", "GET", "/bench/naive/user")),
            }
            for url, endpoint in cases.values():  # warm up every worker and connection pool
                load(url, endpoint, args.connections, 1)
            results: dict[str, list[Result]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, (url, endpoint) in cases.items():
                    results[name].append(load(url, endpoint, args.connections, args.seconds))
    finally:
        upstream.terminate()
        upstream.wait(10)

    print(
        f"proxy bench: {args.rounds} rounds of {args.seconds:.0f} s at {args.connections} "
        f"connections, {workers} gunicorn workers, SQLite; medians of the rounds"
    )
    print(f"{'case':>8} {'rps':>8} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'errors':>7}")
    summary = {name: median_result(rounds) for name, rounds in results.items()}
    for name, result in summary.items():
        print(
            f"{name:>8} {result.rps:8.0f} {result.p50:8.2f} {result.p99:8.2f} "
            f"{result.non_2xx:8d} {result.errors:7d}"
        )
    added = summary["proxy"].p50 - summary["direct"].p50
    versus_naive = summary["proxy"].rps / summary["naive"].rps
    print(
        f"credvault adds {added:.2f} ms at p50 over the direct call (target <= {ADDED_P50_MS} ms: "
        f"{'met' if added <= ADDED_P50_MS else 'MISSED'}); its rps is {versus_naive:.2f}x the "
        f"naive forwarder's (target > 1: {'met' if versus_naive > 1 else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
