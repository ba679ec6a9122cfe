"""A webhook receiver on 127.0.0.1 (a thread of the test process) that records what it gets
and answers as it is told, and the account API's webhook calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.helpers import Api


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers each POST with the next of `answers` (status, headers), then 200s."""

    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    answers: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    delay: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def bodies(self) -> list[dict]:
        return [json.loads(each.body) for each in self.received]


def start_receiver() -> Receiver:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.received.append(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if receiver.delay:
                threading.Event().wait(receiver.delay)
            status, headers = receiver.answers.pop(0) if receiver.answers else (200, {})
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(server)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return receiver


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    found = start_receiver()
    settings.CREDVAULT_WEBHOOK_ALLOWED_HOSTS = "127.0.0.1"
    yield found
    found.server.shutdown()
    found.server.server_close()


def create_webhook(api: Api, url: str, **fields: object):
    return api.raw("POST", "/api/v1/webhooks", json.dumps({"url": url, **fields}))
