"""Test helpers: an account-API client, marked secrets, and a real HTTP server on 127.0.0.1
that plays a provider (the test sees each request exactly as the provider would)."""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.test import Client

PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def marked(label: str = "value") -> str:
    """A secret that is easy to search for in any output."""
    return f"MARKED-SECRET-{label}-{secrets.token_hex(8)}"


def creds(**values: str) -> list[dict[str, str]]:
    return [{"keyName": name, "value": value} for name, value in values.items()]


class Api:
    """The account API with one token."""

    def __init__(self, client: Client, token: str | None) -> None:
        self.client = client
        self.token = token

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        headers.update(extra or {})
        return headers

    def list(self):
        return self.client.get("/api/v1/services", headers=self.headers())

    def raw(self, method: str, path: str, body: bytes | str = b"", **kwargs: Any):
        content_type = kwargs.pop("content_type", "application/json")
        # The test client leaves out Content-Type for an empty body; a real client does not.
        return self.client.generic(
            method,
            path,
            body,
            content_type=content_type,
            headers=self.headers(kwargs),
            CONTENT_TYPE=content_type,
        )

    def store(self, service: str, credentials: list[dict[str, str]]):
        body = json.dumps({"service": service, "credentials": credentials})
        return self.raw("PUT", "/api/v1/services/credentials", body)

    def test(self, service: str, credentials: list[dict[str, str]]):
        body = json.dumps({"service": service, "credentials": credentials})
        return self.raw("POST", "/api/v1/services/test", body)

    def delete(self, service: str):
        return self.client.delete(f"/api/v1/services/credentials/{service}", headers=self.headers())


def assert_problem(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response["Cache-Control"] == "no-store"
    body = json.loads(response.content)
    assert set(body) >= PROBLEM_KEYS
    extensions = {"errors"} | ({"reason"} if code == "verification_failed" else set())
    assert set(body) - PROBLEM_KEYS <= extensions
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["code"] == code
    assert body["title"]
    assert body["detail"]
    assert b"Traceback" not in response.content
    return body


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing a kept-alive connection is normal here, not worth a traceback."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    hang: bool = False
    drip_seconds: float = 0.0


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
                    Recorded(self.command, self.path, dict(self.headers.items()), body)
                )
                reply = server.reply
                if reply.hang:
                    server.released.wait(30)
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if reply.drip_seconds:
                    for byte in reply.body:
                        if server.released.wait(reply.drip_seconds):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                else:
                    self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
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


def elapsed(start: float) -> float:
    return time.monotonic() - start
