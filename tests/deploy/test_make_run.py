"""`make run`: a taken address stops it before any token or curl line is printed, the
curl line it prints names the address it serves at (CREDVAULT_BIND), and Ctrl-C stops it
without a traceback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.harness import BASE_DIR, free_port, listening, server_env

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")},
    )


def test_a_taken_port_stops_make_run_before_anything_is_printed():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        result = make("run", f"CREDVAULT_BIND={taken}")
    assert result.returncode != 0
    [line] = [line for line in result.stderr.splitlines() if line.startswith("credvault:")]
    assert taken in line
    assert "the address is in use" in line
    assert "CREDVAULT_BIND=" in line
    assert "cvt_" not in result.stdout + result.stderr
    assert "curl" not in result.stdout
    assert "migrate" not in result.stdout  # stopped before the database was touched


def test_a_bad_web_concurrency_stops_make_run_in_one_line_before_gunicorn():
    """gunicorn itself would read it with int(), a traceback: the settings are checked first."""
    result = make("run", "WEB_CONCURRENCY=x", f"CREDVAULT_BIND=127.0.0.1:{free_port()}")
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    # Every line but make's own report of the failed step.
    [line] = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    assert line == "credvault: WEB_CONCURRENCY must be a whole number, at least 1 worker."
    assert "migrate" not in result.stdout  # stopped before the database was touched
    assert "cvt_" not in result.stdout + result.stderr


def test_the_printed_curl_line_uses_the_address_served():
    plan = make("-n", "run", "CREDVAULT_BIND=127.0.0.1:9123").stdout
    assert "bootstrap_demo --base-url http://127.0.0.1:9123" in plan
    assert "gunicorn -c gunicorn.conf.py" in plan


def test_make_run_sets_the_public_url_to_the_address_served():
    plan = make("-n", "run", "CREDVAULT_BIND=127.0.0.1:9123").stdout
    assert "scripts/write_env.py --follow-bind .env" in plan


def test_ctrl_c_stops_the_server_without_a_traceback(tmp_path):
    """Ctrl-C sends SIGINT to the terminal's whole process group: gunicorn's master and each
    gevent worker. Each worker then had SIGINT from the terminal and SIGQUIT from the master,
    and gevent printed the second quit's SystemExit with its traceback."""
    bind = f"127.0.0.1:{free_port()}"
    env = server_env(
        f"sqlite:///{tmp_path / 'run.sqlite3'}",
        CREDVAULT_BIND=bind,
        WEB_CONCURRENCY="1",  # a worker that answers has installed its signal handlers
        LOG_LEVEL="INFO",
    )
    # The last line of `make run`, in a process group of its own, as a terminal runs it.
    server = subprocess.Popen(
        [str(BASE_DIR / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py",
         "credvault.wsgi:application"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://{bind}/healthz", timeout=1) as answer:
                    assert answer.status == 200
                    break
            except (urllib.error.URLError, OSError):
                assert server.poll() is None, server.communicate()[1]
                time.sleep(0.1)
        os.killpg(server.pid, signal.SIGINT)
        _, stderr = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    assert server.returncode == 0, stderr
    assert "Handling signal: int" in stderr
    assert "Worker exiting" in stderr
    assert "Shutting down: Master" in stderr
    assert "Traceback" not in stderr
    assert "SystemExit" not in stderr


def test_make_run_starts_the_webhook_worker_beside_gunicorn():
    plan = make("-n", "run", "CREDVAULT_BIND=127.0.0.1:9123").stdout
    serve = plan.splitlines()[-1]
    assert "manage.py deliver_webhooks &" in serve
    assert serve.index("deliver_webhooks") < serve.index("gunicorn -c gunicorn.conf.py")
    assert "trap " in serve


def session_processes(session: int) -> dict[int, str]:
    """The live processes of a session: pid and command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        # The fields after the command's name, which may hold spaces: state, ppid, pgrp, sid.
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[3]) == session:
            found[int(entry)] = cmdline.decode(errors="replace")
    return found


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the processes")
@pytest.mark.parametrize("stop", ["ctrl-c", "gunicorn-stops"])
def test_the_webhook_worker_stops_when_the_server_stops(tmp_path, stop):
    """Ctrl-C reaches gunicorn and the worker alike; when gunicorn stops for another reason
    (here SIGTERM to its master alone), the recipe's trap ends the worker."""
    bind = f"127.0.0.1:{free_port()}"
    serve = make("-n", "run", f"CREDVAULT_BIND={bind}").stdout.splitlines()[-1]
    env = server_env(f"sqlite:///{tmp_path / 'run.sqlite3'}", CREDVAULT_BIND=bind)
    env["WEB_CONCURRENCY"] = "1"
    subprocess.run(
        [str(BASE_DIR / ".venv" / "bin" / "python"), "manage.py", "migrate", "--no-input"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        check=True,
    )
    # The recipe's line, as make runs it, in a process group of its own as a terminal would.
    shell = subprocess.Popen(
        ["/bin/sh", "-c", serve],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        worker = gunicorn = None
        for _ in range(300):
            running = session_processes(shell.pid)
            worker = next((p for p, cmd in running.items() if "deliver_webhooks" in cmd), None)
            gunicorn = next((p for p, cmd in running.items() if "gunicorn" in cmd), None)
            if worker and gunicorn and listening(int(bind.rsplit(":", 1)[1])):
                break
            assert shell.poll() is None, shell.communicate()
            time.sleep(0.1)
        assert worker, session_processes(shell.pid)
        assert gunicorn, session_processes(shell.pid)
        if stop == "ctrl-c":
            os.killpg(shell.pid, signal.SIGINT)
        else:
            # The master is the shell's child; its workers are the master's.
            [master] = [
                pid
                for pid, cmd in session_processes(shell.pid).items()
                if "gunicorn" in cmd and parent_of(pid) == shell.pid
            ]
            os.kill(master, signal.SIGTERM)
        stdout, stderr = shell.communicate(timeout=60)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert session_processes(shell.pid) == {}
    assert "delivering webhooks as" in stdout
    assert "Traceback" not in stderr
    assert "Shutting down: Master" in stderr


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return int(stat.rsplit(")", 1)[1].split()[1])
