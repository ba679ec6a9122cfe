"""Tools that run credvault for real, shared by the live tests, the demo and the proofs (the
fuzzer, the soak, the benchmark): gunicorn on a free loopback port, a throwaway server's
environment and database, manage.py as an operator runs it, and one HTTP request. The providers
such a server calls are stand-ins on 127.0.0.1 (tests/support/stand_ins.py).

Only loopback addresses are ever used.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parents[2]
# A fixed key for throwaway databases of tests, fuzzing and soak runs; never for real data.
HARNESS_KEYS = "harness:" + base64.b64encode(b"H" * 32).decode()
HARNESS_AUDIT_KEYS = "harness-audit:" + base64.b64encode(b"I" * 32).decode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server accepts connections on host:port."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def fresh_postgres(url: str) -> None:
    """Drop and create the PostgreSQL database named by `url` (a throwaway one)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    admin = base.replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db.execute(f'CREATE DATABASE "{name}"')


def manage(env: dict[str, str], *args: str) -> str:
    """`manage.py ARGS` in `env`, as an operator runs it: its standard output, or an error
    naming the command with the end of what it printed on standard error."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout.strip()


def server_env(database_url: str, **overrides: str) -> dict[str, str]:
    """The environment of a throwaway server: secrets of its own, plain local HTTP."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CREDVAULT_", "DATABASE_URL", "CACHE_URL"))
    }
    env.update(
        {
            "SECRET_KEY": secrets.token_urlsafe(50),
            "CREDVAULT_ENCRYPTION_KEYS": HARNESS_KEYS,
            "CREDVAULT_AUDIT_KEYS": HARNESS_AUDIT_KEYS,
            "DATABASE_URL": database_url,
            "DEBUG": "false",
            "SECURE_SSL_REDIRECT": "false",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "LOG_LEVEL": "WARNING",
        }
    )
    env.update(overrides)
    return env


def every_provider_at(url: str) -> str:
    """CREDVAULT_PROVIDER_BASE_URLS with every catalog provider, and each of its other bases
    (`huggingface~router`), pointed at `url`, a stand-in on 127.0.0.1, so that a throwaway
    server never calls a real provider."""
    from providers.catalog import CATALOG_PATH, parse_catalog

    providers = parse_catalog(CATALOG_PATH.read_text(encoding="utf-8"))
    every = {provider_id: url for provider_id in providers}
    for provider in providers.values():
        every.update({f"{provider.id}~{name}": url for name in provider.bases})
    return json.dumps(every)


def migrated_account(env: dict[str, str], name: str) -> str:
    """Migrate the database of `env`, create the account `name`, and return a token of it."""
    manage(env, "migrate", "--no-input")
    manage(env, "create_account", name)
    return manage(env, "issue_token", name)


class Gunicorn:
    """credvault under gunicorn on a free loopback port, as `make run` serves it."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        workers: int = 2,
        log: Path | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        """`tls`: a certificate and its key, to serve https (an SDK that calls https only)."""
        self.env = env
        self.workers = workers
        self.port = free_port()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        # Not under var/, which the demo's test watches while other workers run their servers.
        self.log = log or Path(tempfile.gettempdir()) / f"credvault-gunicorn-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> Gunicorn:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        handle = self.log.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--config",
                str(BASE_DIR / "gunicorn.conf.py"),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--graceful-timeout",
                "5",
                *(
                    ("--certfile", str(self.tls[0]), "--keyfile", str(self.tls[1]))
                    if self.tls
                    else ()
                ),
                "credvault.wsgi:application",
            ],
            cwd=BASE_DIR,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        handle.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited early; see {self.log}")
            try:
                context = ssl.create_default_context(cafile=self.tls[0]) if self.tls else None
                with urllib.request.urlopen(
                    f"{self.url}/healthz", timeout=1, context=context
                ) as response:
                    if response.status == 200 and len(self.worker_pids()) >= self.workers:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer within {timeout} s; see {self.log}")

    def worker_pids(self) -> list[int]:
        """The master's live children, read from /proc."""
        if self.process is None:
            return []
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid and fields[0] != "Z":
                pids.append(int(entry.name))
        return pids

    def kill_worker(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> Gunicorn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def request(
    method: str,
    url: str,
    *,
    token: str | None = None,
    body: Any = None,
    timeout: float = 30,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request with the standard library: (status, headers, body)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = dict(headers or {})
    if data is not None:
        headers.setdefault("Content-Type", "application/json")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
