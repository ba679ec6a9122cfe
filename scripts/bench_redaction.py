"""Benchmark of redaction's cost: `python -m scripts.bench_redaction` (a measurement; nothing is
asserted).

10 MB of answer in each of these forms, none holding the injected value:

- `plain`: JSON-like text without an escape;
- `percent`: `%67%68...`, every byte a percent escape;
- `json`: `\\u0067\\u0068...`, every character a JSON escape;
- `html-hex`, `html-dec`, `html-named`: `&#x67;...`, `&#103;...`, `&gt;&lt;...`.

Two measures, each the median of `--rounds` runs, in CPU seconds (`time.process_time()` in this
process, or the worker's threads' time on a CPU from `/proc/PID/task/*/schedstat`):

- `redaction`: the body fed to `StreamRedaction` in the 64 KiB pieces the outbound client reads
  (`providers.http.client.READ_CHUNK`), in this process: redaction alone;
- `worker`: the body streamed through credvault under gunicorn (one gevent worker, SQLite) from
  a stand-in provider on 127.0.0.1 in 64 KiB chunks, the agent reading it whole: the worker's CPU
  for the whole call, which is what an answer costs to pass on.

Each form's figure is printed beside its ratio to `plain`'s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from providers.http.client import READ_CHUNK

SIZE = 10 * 1000 * 1000
SECRET = "sk-proj-9fK2mQ7xR4tV8wZ1bN5cL3hJ6gD0sA"  # noqa: S105 (made up: the injected value)
UNITS = {
    "plain": b'{"id": 12345, "text": "hello world, nothing escaped here"}, ',
    "percent": b"%67%68",
    "json": b"\\u0067\\u0068",
    "html-hex": b"&#x67;&#x68;",
    "html-dec": b"&#103;&#104;",
    "html-named": b"&gt;&lt;",
}
WORK = Path(__file__).resolve().parent.parent / "var" / "bench_redaction"


def body(form: str) -> bytes:
    unit = UNITS[form]
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


def redaction_seconds(data: bytes) -> float:
    from services.broker.redaction import Redaction, StreamRedaction

    redaction = Redaction([SECRET, f"user:{SECRET}"])
    started = time.process_time()
    stream = StreamRedaction(redaction)
    passed = 0
    for at in range(0, len(data), READ_CHUNK):
        passed += len(stream.feed(data[at : at + READ_CHUNK]))
    passed += len(stream.end())
    seconds = time.process_time() - started
    assert passed == len(data), f"{passed} bytes passed of {len(data)}"
    return seconds


def cpu_seconds(pid: int) -> float:
    """The CPU time of process `pid` so far, to the nanosecond: each of its threads' time on a
    CPU (`/proc/PID/task/*/schedstat`; `/proc/PID/stat` counts in 10 ms ticks)."""
    tasks = Path(f"/proc/{pid}/task").glob("*/schedstat")
    return sum(int(task.read_text().split()[0]) for task in tasks) / 1e9


def worker_seconds(rounds: int) -> dict[str, list[float]]:
    import urllib3

    from tests.support.harness import Gunicorn, manage, request, server_env
    from tests.support.stand_ins import ProviderServer

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    provider = ProviderServer().start()
    figures: dict[str, list[float]] = {form: [] for form in UNITS}
    try:
        env = server_env(
            f"sqlite:///{WORK / 'redaction.sqlite3'}",
            CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider.url}),
            CREDVAULT_PROXY_MAX_RESPONSE=str(4 * SIZE),
        )
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "create_account", "bench")
        account_token = manage(env, "issue_token", "bench")
        manage(env, "create_agent", "bench", "bot", "--service", "github")
        agent = manage(env, "issue_agent_token", "bench", "bot")
        with Gunicorn(env, workers=1, log=WORK / "gunicorn.log") as server:
            stored = {"service": "github", "credentials": [{"keyName": "api_key", "value": SECRET}]}
            status, _, _ = request(
                "PUT", f"{server.url}/api/v1/services/credentials", token=account_token, body=stored
            )
            if status != 201:
                raise RuntimeError(f"storing the github set failed with {status}")
            [worker] = server.worker_pids()
            pieces = {form: _pieces(body(form)) for form in UNITS}
            for round_ in range(rounds + 1):
                for form in UNITS:  # interleaved: a change in the machine's load hits all
                    provider.answer(
                        200, headers={"Content-Type": "text/plain"}, chunks=pieces[form]
                    )
                    before = cpu_seconds(worker)
                    answer = urllib3.request(
                        "GET",
                        f"{server.url}/api/v1/agent/proxy/github/stream",
                        headers={"Authorization": f"Bearer {agent}"},
                        preload_content=False,
                        timeout=urllib3.Timeout(connect=5, read=120),
                        retries=False,
                    )
                    received = sum(len(piece) for piece in answer.read_chunked())
                    if answer.status != 200 or received != SIZE:
                        raise RuntimeError(f"{form}: {answer.status}, {received} bytes")
                    time.sleep(0.2)  # the call's audit event, written as the body ends
                    if round_:  # the first round warms the worker
                        figures[form].append(cpu_seconds(worker) - before)
    finally:
        provider.stop()
    return figures


def _pieces(data: bytes) -> tuple[bytes, ...]:
    return tuple(data[at : at + READ_CHUNK] for at in range(0, len(data), READ_CHUNK))


def main() -> int:
    import django

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-worker", action="store_true", help="the in-process measure only")
    args = parser.parse_args()
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "credvault.settings")
    django.setup()
    redaction = {
        form: statistics.median(redaction_seconds(body(form)) for _ in range(args.rounds))
        for form in UNITS
    }
    worker = {} if args.no_worker else worker_seconds(args.rounds)
    print(f"10 MB of each form, median of {args.rounds} rounds, CPU seconds (x plain)")
    print(f"{'form':>12} {'redaction':>18} {'worker, whole call':>22}")
    for form in UNITS:
        alone = f"{redaction[form]:8.3f} ({redaction[form] / redaction['plain']:5.1f}x)"
        line = f"{form:>12} {alone:>18}"
        if worker:
            seconds = statistics.median(worker[form])
            plain = statistics.median(worker["plain"])
            line += f" {f'{seconds:8.3f} ({seconds / plain:5.2f}x)':>22}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
