"""Streamed answers through credvault under gunicorn, as `make run` serves it: the provider is a
stand-in on 127.0.0.1 that sends its body chunked (an SSE stream, a large download), and the
agent reads it with urllib3 as it arrives. Each chunk passes on as it comes; a secret split
across two chunks is redacted; a stream ends whole, cut (its size, its duration, a silence) or
abandoned by the agent, and its audit event says which."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import urllib3

from services.models import AuditEvent
from tests.support.harness import Gunicorn, server_env
from tests.support.helpers import PROXY_PREFIX, agent_token, creds, database_url, marked, put_agent
from tests.support.stand_ins import ProviderServer

# slow: streams through gunicorn that last seconds by design.
pytestmark = pytest.mark.slow

MIB = 1024 * 1024
OCTETS = {"Content-Type": "application/octet-stream"}
SSE_HEADERS = {"Content-Type": "text/event-stream", "X-Request-ID": "req_provider_1"}


@pytest.fixture
def provider():
    server = ProviderServer().start()
    yield server
    server.stop()


@pytest.fixture
def streaming(alice_api, provider, settings):
    """Alice's github set (a marked value), her agent's token, and a function that starts
    gunicorn (one worker) against the stand-in with the given settings."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    token = agent_token(alice_api, "bot")

    def serve(**overrides: str) -> Gunicorn:
        env = server_env(
            database_url(),
            # The keys the test's own requests sealed the set and chained the events with.
            CREDVAULT_ENCRYPTION_KEYS=settings.CREDVAULT_ENCRYPTION_KEYS,
            CREDVAULT_AUDIT_KEYS=settings.CREDVAULT_AUDIT_KEYS,
            CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": provider.url}),
            **overrides,
        )
        return Gunicorn(env, workers=1)

    return value, token, serve


def _open(server: Gunicorn, token: str, path: str = "/stream") -> urllib3.BaseHTTPResponse:
    return urllib3.request(
        "GET",
        f"{server.url}{PROXY_PREFIX}/github{path}",
        headers={"Authorization": f"Bearer {token}"},
        preload_content=False,
        timeout=urllib3.Timeout(connect=5, read=60),
        retries=False,
    )


def _read_cut(answer: urllib3.BaseHTTPResponse) -> bytes:
    """What arrived of a body that ended without its end (credvault cut it)."""
    received = bytearray()
    try:
        for piece in answer.read_chunked():
            received += piece
    except urllib3.exceptions.ProtocolError:
        return bytes(received)
    raise AssertionError("the body ended whole")


def _last_proxy_event(wait: float = 10) -> AuditEvent:
    """The newest agent.proxy event, waited for: a stream's is written as its body ends."""
    deadline = time.monotonic() + wait
    while True:
        event = AuditEvent.objects.filter(action="agent.proxy").order_by("-seq").first()
        if event is not None or time.monotonic() > deadline:
            assert event is not None, "no agent.proxy event"
            return event
        time.sleep(0.05)


def _worker_pid(server: Gunicorn) -> int:
    deadline = time.monotonic() + 10
    path = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    while not (children := path.read_text().split()):
        assert time.monotonic() < deadline, "gunicorn started no worker"
        time.sleep(0.05)
    return int(children[0])


def _memory_kib(pid: int, field: str) -> int:
    """A field of /proc/PID/status in KiB: VmRSS now, VmHWM the peak."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


@pytest.mark.django_db(transaction=True)
def test_each_chunk_passes_on_as_it_arrives(streaming, provider):
    """Six events 400 ms apart: each reaches the agent before the provider sends the next.
    Buffered, the first would arrive after the last was sent (issue: 1.21 s)."""
    _, token, serve = streaming
    events = tuple(f'data: {{"n": {n}}}\n\n'.encode() for n in range(6))
    provider.answer(200, headers=SSE_HEADERS, chunks=events, chunk_seconds=0.4)
    with serve() as server:
        answer = _open(server, token)
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "text/event-stream"
        assert answer.headers["X-Request-ID"] == "req_provider_1"
        assert answer.headers["X-Credvault-Request-Id"]
        arrived, received = [], b""
        for piece in answer.read_chunked():
            received += piece
            while len(arrived) < received.count(b"\n\n"):
                arrived.append(time.monotonic())
        assert received == b"".join(events)
    assert len(provider.sent_at) == 6
    for number in range(5):
        assert arrived[number] < provider.sent_at[number + 1], f"event {number} waited"
    first_delay = arrived[0] - provider.sent_at[0]
    print(f"time to first event through credvault: {first_delay * 1000:.1f} ms")
    event = _last_proxy_event()
    assert (event.outcome, event.upstream_status) == ("success", 200)


@pytest.mark.django_db(transaction=True)
def test_a_secret_split_across_two_chunks_is_redacted(streaming, provider):
    value, token, serve = streaming
    escaped = "".join(f"\\u{ord(c):04x}" for c in value)
    chunks = []
    for form in (value, escaped, value.replace("-", "%2D")):
        half = len(form) // 2
        chunks += [f'data: {{"echo": "{form[:half]}'.encode(), f'{form[half:]}"}}\n\n'.encode()]
    provider.answer(200, headers=SSE_HEADERS, chunks=tuple(chunks), chunk_seconds=0.05)
    with serve() as server:
        body = _open(server, token).read()
    assert body.count(b"[REDACTED]") == 3
    assert body.count(b"data: ") == 3
    for fragment in (value[:8], value[-8:], escaped[:12], escaped[-12:]):
        assert fragment.encode() not in body


@pytest.mark.django_db(transaction=True)
def test_a_stream_longer_than_the_timeout_completes(streaming, provider):
    """35 s of events 5 s apart, under the default CREDVAULT_PROXY_TIMEOUT (30 s): the timeout
    bounds each silence, not the stream."""
    _, token, serve = streaming
    events = tuple(f"data: {n}\n\n".encode() for n in range(8))
    provider.answer(200, headers=SSE_HEADERS, chunks=events, chunk_seconds=5)
    with serve() as server:
        started = time.monotonic()
        body = _open(server, token).read()
    assert time.monotonic() - started >= 35
    assert body == b"".join(events)
    assert _last_proxy_event().outcome == "success"


@pytest.mark.django_db(transaction=True)
def test_a_long_silence_cuts_the_stream(streaming, provider):
    _, token, serve = streaming
    provider.answer(
        200, headers=SSE_HEADERS, chunks=(b"data: 1\n\n", b"data: 2\n\n"), chunk_seconds=3
    )
    with serve(CREDVAULT_PROXY_TIMEOUT="1") as server:
        answer = _open(server, token)
        assert answer.status == 200
        with pytest.raises(urllib3.exceptions.ProtocolError):
            answer.read()
    assert _last_proxy_event().outcome == "cut"


@pytest.mark.django_db(transaction=True)
def test_a_stream_past_the_whole_duration_is_cut(streaming, provider):
    _, token, serve = streaming
    events = tuple(f"data: {n}\n\n".encode() for n in range(20))
    provider.answer(200, headers=SSE_HEADERS, chunks=events, chunk_seconds=0.3)
    with serve(CREDVAULT_PROXY_TIMEOUT="1", CREDVAULT_PROXY_MAX_DURATION="2") as server:
        received = _read_cut(_open(server, token))
    assert 2 <= received.count(b"\n\n") < 20
    event = _last_proxy_event()
    assert (event.outcome, event.upstream_status, event.status) == ("cut", 200, 200)


@pytest.mark.django_db(transaction=True)
def test_a_stream_past_the_default_size_is_cut_and_audited(streaming, provider):
    _, token, serve = streaming
    provider.answer(200, headers=OCTETS, generated_bytes=12 * MIB)
    with serve() as server:
        received = len(_read_cut(_open(server, token)))
    assert 9 * MIB < received <= 10 * MIB
    assert _last_proxy_event().outcome == "cut"


@pytest.mark.django_db(transaction=True)
def test_a_large_download_passes_with_the_workers_memory_flat(streaming, provider):
    """200 MiB with CREDVAULT_PROXY_MAX_RESPONSE at 256 MiB: the worker's peak memory grows by
    far less than the answer (it holds one piece at a time, never the body)."""
    _, token, serve = streaming
    size = 200 * MIB
    provider.answer(200, headers=OCTETS, generated_bytes=size)
    with serve(CREDVAULT_PROXY_MAX_RESPONSE=str(256 * MIB)) as server:
        worker = _worker_pid(server)
        # A first call warms the worker (imports, connections) before the peak is read.
        provider.answer(200, b"{}")
        assert _open(server, token, "/warm").read() == b"{}"
        before = _memory_kib(worker, "VmHWM")
        provider.answer(200, headers=OCTETS, generated_bytes=size)
        received = 0
        answer = _open(server, token)
        for piece in answer.read_chunked():
            received += len(piece)
        grown = _memory_kib(worker, "VmHWM") - before
    assert received == size
    print(f"worker's peak memory grew by {grown} KiB for a {size // MIB} MiB answer")
    assert grown < 16 * 1024
    assert _last_proxy_event().outcome == "success"


@pytest.mark.django_db(transaction=True)
def test_an_agent_that_goes_away_frees_the_providers_connection(streaming, provider):
    _, token, serve = streaming
    events = tuple(f"data: {n}\n\n".encode() + b"x" * 512 for n in range(300))
    provider.answer(200, headers=SSE_HEADERS, chunks=events, chunk_seconds=0.1)
    with serve() as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(
            f"GET {PROXY_PREFIX}/github/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # a reset: the agent is gone
        assert provider.broken.wait(10), "the provider's connection was kept"
    assert not provider.finished.is_set()
    assert _last_proxy_event().outcome == "abandoned"
