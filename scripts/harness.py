"""Tools that run credvault for real, shared by the live tests, the fuzzer and the soak:
a gunicorn server on 127.0.0.1 and a fake provider that records what it is sent.

Only loopback addresses are ever used.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
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
    """CREDVAULT_PROVIDER_BASE_URLS with every catalog provider pointed at `url`, a stand-in
    on 127.0.0.1, so that a throwaway server never calls a real provider."""
    from providers.catalog import CATALOG_PATH, parse_catalog

    ids = parse_catalog(CATALOG_PATH.read_text(encoding="utf-8"))
    return json.dumps({provider_id: url for provider_id in ids})


def migrated_account(env: dict[str, str], name: str) -> str:
    """Migrate the database of `env`, create the account `name`, and return a token of it."""
    manage(env, "migrate", "--no-input")
    manage(env, "create_account", name)
    return manage(env, "issue_token", name)


class Gunicorn:
    """credvault under gunicorn on a free loopback port, as `make run` serves it."""

    def __init__(self, env: dict[str, str], *, workers: int = 2, log: Path | None = None) -> None:
        self.env = env
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or BASE_DIR / "var" / f"gunicorn-{self.port}.log"
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
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as response:
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


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    # The client's port: two requests on one kept-alive connection share it.
    peer_port: int = 0


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    hang: bool = False
    drip_seconds: float = 0.0
    delay_seconds: float = 0.0  # before the status line


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing a kept-alive connection is normal here, not worth a traceback."""


class ProviderServer:
    """A provider on 127.0.0.1: records every request and answers with `reply`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.reply = Reply()
        self.released = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                server.requests.append(
                    Recorded(
                        self.command,
                        self.path,
                        dict(self.headers.items()),
                        body,
                        self.client_address[1],
                    )
                )
                reply = server.reply
                if reply.delay_seconds and server.released.wait(reply.delay_seconds):
                    return
                if reply.hang:
                    server.released.wait(30)
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if reply.drip_seconds:
                    for byte in reply.body:
                        if server.released.wait(reply.drip_seconds):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                else:
                    self.wfile.write(reply.body)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def start(self) -> ProviderServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, status: int = 200, body: Any = None, **reply: Any) -> None:
        if body is None:
            body = b"{}"
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.reply = Reply(status=status, body=body, **reply)


class GitHubStandIn:
    """GitHub's REST API as far as `/user`, on 127.0.0.1: answers `GET /user` with a user when
    the bearer token is one of `keys` (and echoes the token in the answer, as a careless API
    might, so that a reader sees credvault redact it), `401 Bad credentials` for another token,
    and `404 Not Found` elsewhere, with GitHub's JSON shapes."""

    def __init__(self, keys: set[str]) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                scheme, _, token = self.headers.get("Authorization", "").partition(" ")
                if self.path.split("?", 1)[0] != "/user":
                    self.reply(404, {"message": "Not Found", "status": "404"})
                elif scheme.lower() not in {"bearer", "token"} or token not in stand_in.keys:
                    self.reply(401, {"message": "Bad credentials", "status": "401"})
                else:
                    user = {"login": "octocat", "id": 1, "type": "User", "seen_token": token}
                    self.reply(200, user)

            def reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.keys = keys
        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> GitHubStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
