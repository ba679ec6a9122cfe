"""Message framing (RFC 9112) and what is answered before Django, over raw
sockets against gunicorn as `make run` starts it:

- a body shorter than its Content-Length is never processed: 400 `bad_request`, nothing stored;
- a body held open is cut off after CREDVAULT_BODY_TIMEOUT: 408 `request_timeout`, and the
  worker it held serves the next request;
- gunicorn's own refusals (431, 414, a bad chunk, chunked with a Content-Length) are problem
  details, never HTML;
- a percent-encoded newline in a path reaches the view and is normalized like the body's.
"""

from __future__ import annotations

import io
import json
import logging
import socket

import pytest
from django.test import RequestFactory

from credvault.wsgi import application  # imported here: it sets Django up, logging included
from services.models import ConnectedService
from tests.support.harness import Gunicorn, server_env
from tests.support.helpers import STORE_PATH, creds, database_url, raw_store, store_body


def exchange(port: int, raw: bytes, *, close_write: bool = False, timeout: float = 15) -> tuple:
    """Send `raw` as it is, then read the answer to its end: (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while b"\r\n\r\n" not in received or not _complete(received):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            return len(body) >= int(value)
    return False


def problem(answer: tuple, status: int, code: str) -> dict:
    got, headers, body = answer
    assert got == status, body[:300]
    assert headers["content-type"] == "application/problem+json"
    assert headers["cache-control"] == "no-store"
    document = json.loads(body)
    assert document["status"] == status
    assert document["code"] == code
    assert set(document) == {"type", "title", "status", "detail", "code"}
    return document


@pytest.mark.django_db
def test_a_short_body_is_never_processed_in_the_wsgi_application(alice_api, caplog):
    raw = store_body("short")
    environ = dict(
        RequestFactory()
        .put(STORE_PATH, raw, content_type="application/json", headers=alice_api.headers())
        .environ
    )
    environ["CONTENT_LENGTH"] = str(len(raw) + 40)  # the client promised more than it sent
    environ["wsgi.input"] = io.BytesIO(raw)
    status = []
    with caplog.at_level(logging.WARNING, logger="credvault.access"):
        body = b"".join(application(environ, lambda s, h, exc_info=None: status.append(s)))
    assert status == ["400 Bad Request"]
    assert json.loads(body)["code"] == "bad_request"
    assert not ConnectedService.objects.filter(service="short").exists()
    assert any("ended early" in r.getMessage() for r in caplog.records)


@pytest.fixture
def server(settings):
    with Gunicorn(server_env(database_url(), CREDVAULT_BODY_TIMEOUT="1.5"), workers=1) as live:
        yield live


@pytest.mark.django_db(transaction=True)
class TestOverRawSockets:
    def test_a_body_that_ends_before_its_length_is_not_stored(self, server, alice_api):
        raw = store_body("truncated")
        answer = exchange(
            server.port, raw_store(alice_api.token, raw, length=1000), close_write=True
        )
        problem(answer, 400, "bad_request")
        assert not ConnectedService.objects.filter(service="truncated").exists()
        # The same body, framed right, is stored.
        assert exchange(server.port, raw_store(alice_api.token, raw))[0] == 201

    def test_a_body_held_open_is_cut_off_by_its_deadline(self, server, alice_api):
        raw = raw_store(alice_api.token, store_body("held")[:13], length=1000)
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as held:
            held.sendall(raw)
            # The held body holds no worker: the next request is answered while it waits
            # (docs/performance.md, "Slow clients"); then its deadline cuts it off.
            assert exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200
            # To the server's close: the status line and the body may come in two segments.
            answer = b""
            while chunk := held.recv(65536):
                answer += chunk
        status_line = answer.split(b"\r\n", 1)[0]
        assert status_line == b"HTTP/1.1 408 Request Timeout"
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["code"] == "request_timeout"
        assert not ConnectedService.objects.filter(service="held").exists()

    def test_an_unfinished_chunked_body_is_cut_off(self, server, alice_api):
        raw = (
            f"PUT {STORE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {alice_api.token}\r\n"
            'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ser\r\n'
        ).encode()
        problem(exchange(server.port, raw), 408, "request_timeout")

    @pytest.mark.parametrize(
        ("raw", "status", "code"),
        [
            (
                b"GET /api/v1/services HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                + b"a" * 9000
                + b"\r\n\r\n",
                431,
                "request_header_too_large",
            ),
            (b"GET /" + b"a" * 6000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
            (
                b"PUT " + STORE_PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                400,
                "bad_request",
            ),
            (
                b"PUT " + STORE_PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                400,
                "bad_request",
            ),
        ],
        ids=["header-9KB", "path-6000", "bad-chunk-size", "chunked-with-length"],
    )
    def test_gunicorns_own_refusals_are_problem_details(self, server, raw, status, code):
        document = problem(exchange(server.port, raw), status, code)
        assert b"<html" not in json.dumps(document).encode()

    def test_a_newline_in_the_path_names_the_service_the_body_stored(self, server, alice_api):
        assert alice_api.store("line\nbreak", creds(api_key="v")).status_code == 201
        raw = (
            "DELETE /api/v1/services/credentials/line%0D%0Abreak HTTP/1.1\r\nHost: 127.0.0.1"
            f"\r\nAuthorization: Bearer {alice_api.token}\r\n\r\n"
        ).encode()
        assert exchange(server.port, raw)[0] == 204
        assert not ConnectedService.objects.filter(service="line-break").exists()
