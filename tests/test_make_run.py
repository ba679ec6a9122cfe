"""`make run`: a taken address stops it before any token or curl line is printed, and the
curl line it prints names the address it serves at (CREDVAULT_BIND)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from scripts.harness import BASE_DIR

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


def test_the_printed_curl_line_uses_the_address_served():
    plan = make("-n", "run", "CREDVAULT_BIND=127.0.0.1:9123").stdout
    assert "bootstrap_demo --base-url http://127.0.0.1:9123" in plan
    assert "gunicorn -c gunicorn.conf.py" in plan


def test_make_run_sets_the_public_url_to_the_address_served():
    plan = make("-n", "run", "CREDVAULT_BIND=127.0.0.1:9123").stdout
    assert "scripts/write_env.py --follow-bind .env" in plan
