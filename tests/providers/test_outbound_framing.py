"""A doubtful answer never reaches another account's call: connections to a provider are pooled
per account and service, and go back to the pool only after an answer that ended exactly where
its framing said; a request body is refused on GET, HEAD and OPTIONS; an answer with a
Transfer-Encoding other than `chunked`, or with a header that holds a control character, is
502 `upstream_bad_answer`, and the audit records that 502.

The providers here are raw-socket servers on 127.0.0.1 (a thread each), because the answers
they send are ones no HTTP library would write."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress

import pytest

from providers.http.client import send
from providers.http.connections import pools
from providers.http.destinations import Destination
from providers.http.failures import Failure, OutboundError
from services.models import AuditEvent
from tests.support.helpers import agent_token, call, creds, marked, put_agent


class SocketStandIn:
    """A provider on 127.0.0.1 written on raw sockets: each connection is handed to `serve`
    (the socket, the client's port) in a thread of its own."""

    def __init__(self, serve: Callable[[socket.socket, int], None]) -> None:
        self.serve = serve
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                connection, peer = self.listener.accept()
            except OSError:
                return
            self.connections.append(connection)
            threading.Thread(target=self._serve, args=(connection, peer[1]), daemon=True).start()

    def _serve(self, connection: socket.socket, peer: int) -> None:
        try:
            self.serve(connection, peer)
        except OSError:
            pass
        finally:
            connection.close()

    def __enter__(self) -> SocketStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        for connection in self.connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def read_head(connection: socket.socket, buffer: bytes) -> tuple[bytes, bytes] | None:
    """The next request head on a connection (up to its blank line), and what came after."""
    while b"\r\n\r\n" not in buffer:
        data = connection.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def reply(status: int, body: bytes, *headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status} OK", "Content-Type: application/json", *headers]
    lines += [f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


class NotesProvider:
    """A provider whose HTTP parser is desync-prone: it reads a request body only on POST, PUT
    and PATCH, so the body of any other request stays on the kept-alive connection and is read
    as the start of the next request. `POST /notes` keeps the whole request it read as a note
    (an API that stores what it is sent, as issue comments or request bins do); `GET /notes`
    lists the notes."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.requests: list[tuple[str, str, int]] = []  # method, path, the client's port

    def serve(self, connection: socket.socket, peer: int) -> None:
        buffer = b""
        while (parsed := read_head(connection, buffer)) is not None:
            head, buffer = parsed
            request_line, *lines = head.split(b"\r\n")
            method, path = request_line.decode("latin-1").split(" ")[:2]
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.decode("latin-1").partition(":") for line in lines)
            }
            body = b""
            if method in ("POST", "PUT", "PATCH"):
                length = int(headers.get("content-length") or 0)
                while len(buffer) < length:
                    buffer += connection.recv(65536)
                body, buffer = buffer[:length], buffer[length:]
            self.requests.append((method, path, peer))
            if (method, path) == ("POST", "/notes"):
                self.notes.append((head + b"\r\n\r\n" + body).decode("latin-1"))
                connection.sendall(reply(201, b"{}"))
            elif path == "/notes":
                connection.sendall(reply(200, json.dumps(self.notes).encode()))
            else:
                connection.sendall(reply(200, b'{"ok":true}'))


# The start of a second request: the next request on the same connection becomes its header
# and, with it, the note the provider keeps.
SMUGGLED = b"POST /notes HTTP/1.1\r\nX-Note: "


@pytest.fixture
def notes_provider(settings) -> Iterator[NotesProvider]:
    provider = NotesProvider()
    with SocketStandIn(provider.serve) as server:
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": server.url})
        pools.clear()
        yield provider
    pools.clear()


def connect_github(api) -> tuple[str, str]:
    """The account's github set (a marked value) and the token of its agent `bot`."""
    value = marked("gh")
    assert api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(api, "bot", ["github"]).status_code == 201
    return value, agent_token(api, "bot")


@pytest.mark.django_db
class TestOneAccountCannotCaptureAnothersCall:
    def test_a_get_body_that_smuggles_a_request_is_refused_with_nothing_sent(
        self, alice_api, bob_api, notes_provider
    ):
        _, alice = connect_github(alice_api)
        bob_key, bob = connect_github(bob_api)
        smuggling = call(alice, "GET", "github", "/repos/o/r", body=SMUGGLED)
        bobs_call = call(bob, "GET", "github", "/user")
        notes = call(alice, "GET", "github", "/notes")
        assert bob_key not in notes.content.decode()
        assert notes.json() == []
        assert smuggling.status_code == 400
        assert smuggling.json()["code"] == "invalid_proxy_request"
        assert bobs_call.json() == {"ok": True}
        assert [(m, p) for m, p, _ in notes_provider.requests] == [
            ("GET", "/user"),
            ("GET", "/notes"),
        ]
        event = AuditEvent.objects.filter(action="agent.proxy").order_by("id").first()
        assert (event.status, event.outcome, event.upstream_status) == (400, "refused", None)

    @pytest.mark.parametrize("method", ["GET", "HEAD"])
    def test_a_body_on_get_and_head_is_refused(self, alice_api, notes_provider, method):
        _, alice = connect_github(alice_api)
        response = call(alice, method, "github", "/repos/o/r", body=b"{}")
        assert response.status_code == 400
        assert notes_provider.requests == []

    def test_a_delete_body_that_smuggles_a_request_captures_no_other_accounts_call(
        self, alice_api, bob_api, notes_provider
    ):
        """A body on DELETE is allowed, and this provider leaves it on the connection: only
        the same account's and service's next call can meet it, never bob's."""
        _, alice = connect_github(alice_api)
        bob_key, bob = connect_github(bob_api)
        assert call(alice, "DELETE", "github", "/repos/o/r", body=SMUGGLED).status_code == 200
        bobs_call = call(bob, "GET", "github", "/user")
        notes = call(alice, "GET", "github", "/notes")
        assert bob_key not in notes.content.decode()
        assert bobs_call.json() == {"ok": True}

    def test_two_accounts_never_share_a_connection(self, alice_api, bob_api, notes_provider):
        _, alice = connect_github(alice_api)
        _, bob = connect_github(bob_api)
        for token in (alice, bob, alice, bob):
            assert call(token, "GET", "github", "/user").status_code == 200
        alice_first, bob_first, alice_second, bob_second = (
            peer for _, _, peer in notes_provider.requests
        )
        assert alice_first == alice_second
        assert bob_first == bob_second
        assert alice_first != bob_first

    def test_one_accounts_two_services_never_share_a_connection(
        self, alice_api, notes_provider, settings
    ):
        server_url = json.loads(settings.CREDVAULT_PROVIDER_BASE_URLS)["github"]
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(
            {"github": server_url, "gitlab": server_url}
        )
        assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
        assert alice_api.store("gitlab", creds(api_key=marked("gl"))).status_code == 201
        assert put_agent(alice_api, "bot", ["github", "gitlab"]).status_code == 201
        token = agent_token(alice_api, "bot")
        assert call(token, "GET", "github", "/user").status_code == 200
        assert call(token, "GET", "gitlab", "/user").status_code == 200
        github_peer, gitlab_peer = (peer for _, _, peer in notes_provider.requests)
        assert github_peer != gitlab_peer


class ScriptedProvider:
    """Answers each request with the next of `answers` (raw bytes, sent in one write), then
    with a plain 200; records each request's client port. `close_after` ends the connection
    after the first answer (an answer framed by the connection's end)."""

    def __init__(self, *answers: bytes, close_after: bool = False) -> None:
        self.answers = list(answers)
        self.close_after = close_after
        self.peers: list[int] = []

    def serve(self, connection: socket.socket, peer: int) -> None:
        buffer = b""
        while (parsed := read_head(connection, buffer)) is not None:
            _, buffer = parsed
            self.peers.append(peer)
            answer = self.answers.pop(0) if self.answers else reply(200, b'{"ok":true}')
            connection.sendall(answer)
            if self.close_after:
                return


@pytest.fixture
def scripted(settings):
    """A ScriptedProvider serving github: `scripted(*answers, close_after=...)`."""
    servers = []

    def start(*answers: bytes, close_after: bool = False) -> ScriptedProvider:
        provider = ScriptedProvider(*answers, close_after=close_after)
        server = SocketStandIn(provider.serve).__enter__()
        servers.append(server)
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": server.url})
        return provider

    pools.clear()
    yield start
    pools.clear()
    for server in servers:
        server.__exit__()


PLANTED = reply(200, b'{"planted":true}')


@pytest.mark.django_db
class TestAConnectionGoesBackOnlyAfterAnExactAnswer:
    def test_bytes_after_the_answers_end_close_the_connection(self, alice_api, scripted):
        provider = scripted(reply(200, b"{}") + PLANTED)
        _, token = connect_github(alice_api)
        assert call(token, "GET", "github", "/user").content == b"{}"
        second = call(token, "GET", "github", "/user")
        assert second.json() == {"ok": True}
        first_peer, second_peer = provider.peers
        assert first_peer != second_peer

    def test_a_body_after_a_head_answer_closes_the_connection(self, alice_api, scripted):
        provider = scripted(reply(200, b'{"body":"on a HEAD"}'))
        _, token = connect_github(alice_api)
        assert call(token, "HEAD", "github", "/user").status_code == 200
        assert call(token, "GET", "github", "/user").json() == {"ok": True}
        assert provider.peers[0] != provider.peers[1]

    def test_content_length_and_chunked_together_close_the_connection(self, alice_api, scripted):
        both = (
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\n{}\r\n0\r\n\r\n"
        )
        provider = scripted(both)
        _, token = connect_github(alice_api)
        assert call(token, "GET", "github", "/user").content == b"{}"
        assert call(token, "GET", "github", "/user").json() == {"ok": True}
        assert provider.peers[0] != provider.peers[1]

    def test_an_exact_answer_keeps_the_connection(self, alice_api, scripted):
        chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        provider = scripted(reply(200, b"{}"), chunked)
        _, token = connect_github(alice_api)
        for _ in range(3):
            assert call(token, "GET", "github", "/user").status_code == 200
        assert len(set(provider.peers)) == 1


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n"


def assert_bad_answer(response) -> None:
    assert response.status_code == 502, response.content
    assert response.json()["code"] == "upstream_bad_answer"
    [event] = AuditEvent.objects.filter(action="agent.proxy")
    assert (event.status, event.outcome, event.upstream_status) == (502, "error", None)


@pytest.mark.django_db
class TestABadAnswerIs502:
    @pytest.mark.parametrize(
        "coding", ["gzip, chunked", "gzip", "identity", "chunked, chunked", "deflate,chunked"]
    )
    def test_a_transfer_encoding_other_than_chunked(self, alice_api, scripted, coding):
        value, token = connect_github(alice_api)
        body = json.dumps({"echo": value}).encode()
        data = chunked(gzip.compress(body)) if "gzip" in coding else chunked(body)
        scripted(
            f"HTTP/1.1 200 OK\r\nTransfer-Encoding: {coding}\r\n\r\n".encode() + data,
            close_after=True,
        )
        response = call(token, "GET", "github", "/user")
        assert_bad_answer(response)

    def test_two_transfer_encoding_headers(self, alice_api, scripted):
        _, token = connect_github(alice_api)
        scripted(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(gzip.compress(b"{}")),
            close_after=True,
        )
        assert_bad_answer(call(token, "GET", "github", "/user"))

    @pytest.mark.parametrize(
        "line",
        [
            b"X-Echo: a\x01b",
            b"X-Echo: a\x00b",
            b"X-Echo: a\x1bb",
            b"X-Echo: a\x7fb",
            b"X-Echo: a\x0bb",
            # A bare CR: the header parser would make a header of its own from what follows.
            b"X-Echo: a\rX-Injected: yes",
            b"X-Echo: a\x0cb",
        ],
        ids=["soh", "nul", "esc", "del", "vt", "bare-cr", "ff"],
    )
    def test_a_header_with_a_control_character(self, alice_api, scripted, line):
        _, token = connect_github(alice_api)
        scripted(b"HTTP/1.1 200 OK\r\n" + line + b"\r\nContent-Length: 2\r\n\r\n{}")
        assert_bad_answer(call(token, "GET", "github", "/user"))

    @pytest.mark.parametrize(
        "line",
        [b"X(Echo): b", b"X-Echo : b", b"no colon on this line", b"X-Echo: a\n b"],
        ids=["name-not-a-token", "space-before-colon", "no-colon", "lf-fold"],
    )
    def test_a_header_line_that_does_not_parse(self, alice_api, scripted, line):
        _, token = connect_github(alice_api)
        scripted(b"HTTP/1.1 200 OK\r\n" + line + b"\r\nContent-Length: 2\r\n\r\n{}")
        assert_bad_answer(call(token, "GET", "github", "/user"))

    @pytest.mark.parametrize("length", [b"2, 3", b"abc", b"-2"])
    def test_a_content_length_that_does_not_say_one_length(self, alice_api, scripted, length):
        _, token = connect_github(alice_api)
        scripted(b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\n{}", close_after=True)
        assert_bad_answer(call(token, "GET", "github", "/user"))

    def test_a_folded_header_a_tab_obs_text_and_an_empty_value_are_passed_on(
        self, alice_api, scripted
    ):
        """obs-fold (a line starting with a space) is one header whose parts a space joins; a
        tab and bytes above 0x7F are part of a value; a value may be empty; lines may end at a
        bare LF; a 100 Continue's head may come first."""
        _, token = connect_github(alice_api)
        scripted(
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nX-Tab: a\tb\nX-Latin: caf\xe9\r\n"
            b"X-Empty:\r\nContent-Length: 2\r\n\r\n{}"
        )
        response = call(token, "GET", "github", "/user")
        assert response.status_code == 200
        assert response["X-Folded"] == "a b"
        assert response["X-Tab"] == "a\tb"
        assert response["X-Latin"] == "caf\xe9"
        assert response["X-Empty"] == ""


def test_the_client_never_sends_a_body_on_get_head_or_options():
    destination = Destination("http", "127.0.0.1", 9, "", configured=True)
    for method in ("GET", "HEAD", "OPTIONS"):
        with pytest.raises(ValueError, match="carries no body"):
            send(
                destination=destination,
                method=method,
                target="/",
                headers={},
                body=b"x",
                timeout=1,
                max_answer=10,
            )


class EchoingMalformedProvider:
    """Answers every request with a header line that has no colon and holds the request line
    it got (a provider that echoes what it was sent, badly): when the key is in the path, as
    Telegram's is, the malformed line holds it."""

    def serve(self, connection: socket.socket, peer: int) -> None:
        buffer = b""
        while (parsed := read_head(connection, buffer)) is not None:
            head, buffer = parsed
            request_line = head.split(b"\r\n", 1)[0]
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                b"you sent " + request_line + b"\r\n\r\n{}"
            )


@pytest.fixture
def every_log_record(caplog) -> pytest.LogCaptureFixture:
    """Every logger at DEBUG, the root's and urllib3's, requests', gevent's and Django's among
    them, each record captured."""
    names = ["urllib3", "urllib3.connectionpool", "urllib3.connection", "urllib3.response"]
    names += ["requests", "gevent", "django", "django.request", "django.server"]
    for name in {*names, *logging.root.manager.loggerDict}:
        caplog.set_level(logging.DEBUG, logger=name)
    caplog.set_level(logging.DEBUG)
    return caplog


def assert_nowhere_in(records: list[logging.LogRecord], secret: str) -> None:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    for record in records:
        written = formatter.format(record)  # with the exception and its traceback, if any
        assert secret not in written, record.name
        assert secret not in repr(record.args), record.name


@pytest.mark.django_db
class TestNoLibraryLogsASecret:
    def test_a_malformed_answer_to_a_call_with_the_key_in_its_path(
        self, alice_api, settings, every_log_record
    ):
        with SocketStandIn(EchoingMalformedProvider().serve) as server:
            settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"telegram": server.url})
            pools.clear()
            key = marked("tg")
            assert alice_api.store("telegram", creds(bot_token=key)).status_code == 201
            assert put_agent(alice_api, "bot", ["telegram"]).status_code == 201
            response = call(agent_token(alice_api, "bot"), "GET", "telegram", "/getMe")
            pools.clear()
        assert any(r.name.startswith("urllib3") for r in every_log_record.records)
        assert_nowhere_in(every_log_record.records, key)
        assert key not in every_log_record.text
        assert key not in response.content.decode()
        assert_bad_answer(response)

    def test_the_client_logs_no_url_of_a_malformed_or_a_good_answer(self, every_log_record):
        key = marked("in-path")
        outcomes = []
        for provider in (EchoingMalformedProvider(), ScriptedProvider()):
            with SocketStandIn(provider.serve) as server:
                try:
                    answer = send(
                        destination=Destination.from_base_url(server.url, configured=True),
                        method="GET",
                        target=f"/bot{key}/getMe",
                        headers={},
                        body=None,
                        timeout=5,
                        max_answer=1000,
                    )
                    outcomes.append(answer.status)
                except OutboundError as error:
                    outcomes.append(error.kind)
        pools.clear()
        assert len([r for r in every_log_record.records if r.name.startswith("urllib3")]) >= 2
        assert_nowhere_in(every_log_record.records, key)
        assert outcomes == [Failure.BAD_ANSWER, 200]

    def test_urllib3_used_directly_logs_no_url_and_no_line_of_a_malformed_answer(
        self, every_log_record
    ):
        """Its warning about a header line that does not parse names the URL and quotes the
        line; any code in the process that uses urllib3 gets its arguments withheld."""
        import urllib3

        key = marked("direct")
        with (
            SocketStandIn(EchoingMalformedProvider().serve) as server,
            urllib3.PoolManager() as manager,
        ):
            manager.request("GET", f"{server.url}/bot{key}/getMe", retries=False)
        warnings = [r for r in every_log_record.records if r.levelno >= logging.WARNING]
        assert any(r.name in ("urllib3.connectionpool", "urllib3.connection") for r in warnings)
        assert_nowhere_in(every_log_record.records, key)
