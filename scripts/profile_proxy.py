"""Where a brokered call's CPU goes, kernel included: `python -m scripts.profile_proxy`.

The set-up of `scripts/bench_proxy.py` (its upstream, credvault under gunicorn with
production's workers, on SQLite), then, one case after the other, the same load on the
brokered call (`proxy`) and on the naive forwarder (`naive`), each while `perf record` samples
the workers' CPU clock (`-e cpu-clock`: a software clock, so it runs where hardware counters
are not exposed, and it samples kernel code as well as user code). Prints, per call, each
case's user and system CPU (the workers' /proc accounting) and the samples' split by where
they ran: the kernel, the Python interpreter, the C extensions and libraries; then the kernel's
and the interpreter's busiest symbols of each case. Needs `perf` (Debian: linux-perf) and the
right to profile the workers (root, or `kernel.perf_event_paranoid` at most 1). Then, where
py-spy is installed beside the interpreter (`pip install py-spy`), the same two loads again,
sampled by py-spy (on-CPU only): each Python function's inclusive CPU per call in both cases,
which names the code the proxy runs and the forwarder does not. A measurement; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from scripts.bench import Endpoint, load, measure, production_workers
from scripts.bench_proxy import PROXY_PATH, WORK, bench_setup, serving

# `perf report --sort dso` lines: `    45.23%  python3.11  ...`
_SHARE = re.compile(r"^\s+([\d.]+)%\s+(\S+)\s*$")
PY_SPY = str(Path(sys.executable).with_name("py-spy"))
_SYMBOL = re.compile(r"^\s+([\d.]+)%\s+(\S+)\s+\[([k.])\]\s+(.+?)\s*$")


def user_and_system(pids: list[int]) -> tuple[float, float]:
    """The user and system CPU seconds `pids` have used (/proc/PID/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    user = system = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        user += int(fields[11])
        system += int(fields[12])
    return user / ticks, system / ticks


def where(dso: str) -> str:
    """The group a DSO's samples count to."""
    if dso.startswith("[kernel") or dso == "[vdso]":
        return "kernel"
    name = Path(dso).name
    if ".cpython-" in name or "site-packages" in dso:  # a C extension module
        if "gevent" in dso or "greenlet" in dso:
            return "gevent"
        if "cryptography" in dso or "_rust" in name:
            return "crypto"
        return "other C"
    if "python" in name:
        return "interpreter"
    if name.startswith(("libc.", "libc-", "ld-linux", "libm.")):
        return "libc"
    if "ssl" in name or "crypto" in name:
        return "crypto"
    if "sqlite" in name:
        return "sqlite"
    return "other C"


def report(data: Path, sort: str, limit: float) -> list[str]:
    return subprocess.run(
        [
            *("perf", "report", "-i", str(data), "--stdio", "--no-children", "-g", "none"),
            *("--sort", sort, "--percent-limit", str(limit)),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def profile(server, endpoint: Endpoint, connections: int, seconds: float, frequency: int):
    """The load on `endpoint` under perf: per call, user and system ms, and the samples'
    shares by group and by symbol."""
    pids = server.worker_pids()
    data = WORK / f"{endpoint.name}.perf"
    recorder = subprocess.Popen(
        [
            *("perf", "record", "-q", "-e", "cpu-clock", "-F", str(frequency), "-g"),
            *("-p", ",".join(map(str, pids)), "-o", str(data)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    user_before, system_before = user_and_system(pids)
    result = measure(server, endpoint, connections, seconds)
    user_after, system_after = user_and_system(pids)
    recorder.send_signal(signal.SIGINT)
    recorder.wait(30)
    calls = max(result.requests, 1)
    groups: Counter[str] = Counter()
    for line in report(data, "dso", 0):
        found = _SHARE.match(line)
        if found:
            groups[where(found[2])] += float(found[1])
    symbols = []
    for line in report(data, "dso,sym", 0.5):
        found = _SYMBOL.match(line)
        if found:
            symbols.append((float(found[1]), where(found[2]), found[4]))
    return {
        "calls": result.requests,
        "rps": result.rps,
        "user": (user_after - user_before) * 1000 / calls,
        "system": (system_after - system_before) * 1000 / calls,
        "groups": groups,
        "symbols": symbols,
    }


def python_functions(server, endpoint: Endpoint, connections: int, seconds: float, rate: int):
    """The load on `endpoint` under py-spy (on-CPU samples only, every worker): each Python
    function's inclusive share of the samples, and the CPU per call it stands for."""
    data = WORK / f"{endpoint.name}.pyspy"
    pids = server.worker_pids()
    recorders = [
        subprocess.Popen(
            [
                *(PY_SPY, "record", "--pid", str(pid), "--format", "raw", "--nolineno"),
                *("--rate", str(rate), "--nonblocking", "-o", f"{data}.{pid}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
    ]
    before = sum(user_and_system(pids))
    result = measure(server, endpoint, connections, seconds)
    per_call = (sum(user_and_system(pids)) - before) * 1000 / max(result.requests, 1)
    for recorder in recorders:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
    inclusive: Counter[str] = Counter()
    total = 0
    for pid in pids:
        path = Path(f"{data}.{pid}")
        for line in path.read_text().splitlines() if path.exists() else ():
            stack, _, count = line.rpartition(" ")
            total += int(count)
            for frame in set(stack.split(";")):
                inclusive[frame] += int(count)
    return per_call, {frame: count / max(total, 1) for frame, count in inclusive.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--frequency", type=int, default=999, help="samples a second")
    parser.add_argument("--top", type=int, default=12, help="symbols shown per case")
    parser.add_argument("--python-top", type=int, default=40, help="Python functions shown")
    args = parser.parse_args()
    if not shutil.which("perf"):
        print("perf is not installed (Debian: apt-get install linux-perf)", file=sys.stderr)
        return 1
    with bench_setup() as setup:
        workers = production_workers()
        with serving(setup, workers) as server:
            cases = [
                Endpoint("proxy", "GET", PROXY_PATH + "/user", token=setup.agent),
                Endpoint("naive", "GET", "/bench/naive/user"),
            ]
            for endpoint in cases:
                load(server.url, endpoint, args.connections, 2)  # warm every worker and pool
            profiles = {
                endpoint.name: profile(
                    server, endpoint, args.connections, args.seconds, args.frequency
                )
                for endpoint in cases
            }
            functions = (
                {
                    endpoint.name: python_functions(
                        server, endpoint, args.connections, args.seconds, rate=250
                    )
                    for endpoint in cases
                }
                if Path(PY_SPY).exists()
                else {}
            )
    print(
        f"perf cpu-clock at {args.frequency} Hz, {args.seconds:.0f} s a case at "
        f"{args.connections} connections, {workers} gunicorn workers, SQLite"
    )
    names = sorted({group for p in profiles.values() for group in p["groups"]})
    print(
        f"{'case':>6} {'calls':>7} {'user ms':>8} {'sys ms':>7}  "
        + " ".join(f"{name:>11}" for name in names)
    )
    for case, found in profiles.items():
        total = found["user"] + found["system"]
        shares = " ".join(f"{total * found['groups'][name] / 100:11.3f}" for name in names)
        print(
            f"{case:>6} {found['calls']:7d} {found['user']:8.3f} {found['system']:7.3f}  {shares}"
        )
    print("(the groups in ms of CPU a call: each one's share of the samples times user + sys)")
    for case, found in profiles.items():
        print(f"\n{case}: busiest symbols (share of its samples)")
        for share, group, symbol in found["symbols"][: args.top]:
            print(f"  {share:5.2f}%  {group:<11} {symbol[:90]}")
    if not functions:
        print("\n(py-spy is not installed: pip install py-spy, for the Python functions' split)")
        return 0
    print("\nPython functions, inclusive (py-spy, on-CPU samples): ms of CPU a call, each case")
    (proxy_ms, proxy), (naive_ms, naive) = functions["proxy"], functions["naive"]
    shown = sorted(set(proxy) | set(naive), key=lambda f: -max(proxy.get(f, 0), naive.get(f, 0)))
    print(f"{'proxy':>7} {'naive':>7}  function")
    for frame in shown[: args.python_top]:
        print(
            f"{proxy_ms * proxy.get(frame, 0):7.3f} {naive_ms * naive.get(frame, 0):7.3f}  "
            f"{frame[:110]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
