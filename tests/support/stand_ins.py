"""Stand-ins of the providers credvault calls, shared by the tests and the scripts: each is a
real HTTP server on 127.0.0.1, in a thread of the process that starts it, so that the caller
sees every request exactly as a provider would receive it.

- `ProviderServer`: any provider. Records every request (`Recorded`) and answers each with its
  `Reply` (a status, a body and headers; or a hang, a drip, a delay).
- `GitHubStandIn`: GitHub's REST API as far as `GET /user`, accepting the keys it is given
  (the demo, the README's walk).
- `OAuthServer`: an OAuth provider: a consent page, a token URL and an API.

Only loopback addresses are ever used.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit


@dataclass
class Recorded:
    """One request as the provider received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    # The client's port: two requests on one kept-alive connection share it.
    peer_port: int = 0


@dataclass
class Reply:
    """The provider's answer. `hang` holds each request unanswered until the stand-in stops (30 s
    at most), `drip_seconds` sends the body one byte at a time, `delay_seconds` waits before the
    status line. A stream is sent chunked: `chunks`, one HTTP chunk each, `chunk_seconds` apart
    (the first at once), or `generated_bytes` made as they are sent, 64 KiB a chunk, never held
    whole."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    hang: bool = False
    drip_seconds: float = 0.0
    delay_seconds: float = 0.0  # before the status line
    chunks: tuple[bytes, ...] = ()
    chunk_seconds: float = 0.0
    generated_bytes: int = 0

    @property
    def streamed(self) -> bool:
        return bool(self.chunks or self.generated_bytes)

    def pieces(self):
        """The chunks of a streamed body, in order."""
        yield from self.chunks
        left = self.generated_bytes
        while left > 0:
            piece = GENERATED_PIECE[: min(left, len(GENERATED_PIECE))]
            left -= len(piece)
            yield piece


# What a generated body repeats: text no secret is made of.
GENERATED_PIECE = b"0123456789abcdef" * 4096


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
        # A streamed reply: when each chunk was written (time.monotonic()), whether its last
        # chunk was, and whether a write failed (the client went away).
        self.sent_at: list[float] = []
        self.finished = threading.Event()
        self.broken = threading.Event()
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
                if reply.streamed:
                    self._stream(reply)
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

            def _stream(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for number, piece in enumerate(reply.pieces()):
                        if number and server.released.wait(reply.chunk_seconds):
                            return
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                        server.sent_at.append(time.monotonic())
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    server.finished.set()
                except OSError:
                    server.broken.set()
                    self.close_connection = True

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


@dataclass
class TokenRequest:
    form: dict[str, str]
    headers: dict[str, str]
    path: str = "/token"


@dataclass
class OAuthServer:
    """An OAuth provider: a consent page, a token URL and an API, as a real provider has them.

    - `GET /authorize`: a consent page with an "Allow" link back to the redirect URI with a code
      (and the state); the code remembers the PKCE challenge, if one came, and the redirect URI.
    - `POST /token` (and `POST /refresh`, for a provider that refreshes at a URL of its own):
      `authorization_code` (the verifier must match the challenge when one came; without a
      challenge the verifier is not looked at, as a provider without PKCE does) and
      `refresh_token`; every request is kept (`token_requests`), with its path, form and
      headers. `refresh_mode` makes refreshes fail (`invalid_grant`, `unavailable`);
      `refresh_error` answers each refresh with that status and `error` instead
      (`(200, "bad_client_secret")`, Slack's way), `exchange_error` each code exchange;
      `rotating` makes each refresh replace the refresh token and kill the old one;
      `send_refresh_token = False` leaves it out of refresh answers; `refresh_delay` holds each
      refresh that long; `extra_answer` adds members to every token answer (`instance_url`);
      `stall_after_rotating` holds each refresh's answer that long after the refresh token was
      replaced (a provider that rotates, then answers late); `raw_expires_in` is the
      `expires_in` member of every token answer, as that JSON text exactly (`1e400`).
    - `GET /api/...`: 200 with the current access token as Bearer, else 401.
    """

    expires_in: int = 3600
    rotating: bool = False
    send_refresh_token: bool = True
    refresh_mode: str = "ok"
    refresh_error: tuple[int, str] | None = None
    exchange_error: tuple[int, str] | None = None
    refresh_delay: float = 0.0
    extra_answer: dict[str, str] = field(default_factory=dict)
    stall_after_rotating: float = 0.0
    raw_expires_in: str | None = None
    token_requests: list[TokenRequest] = field(default_factory=list)
    api_requests: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self.codes: dict[str, tuple[str, str]] = {}
        self.access_tokens: set[str] = set()
        self.refresh_tokens: set[str] = set()
        self.refreshes = 0
        self._server: ThreadingHTTPServer | None = None

    # --- control ---

    def start(self) -> OAuthServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def issue(self, *, refresh: bool = True) -> tuple[str, str | None]:
        """A valid access token (and refresh token), as if a connect had happened."""
        with self._lock:
            n = next(self._counter)
            access = f"MARKED-SECRET-access-{n}-{time.monotonic_ns()}"
            self.access_tokens.add(access)
            refresh_token = None
            if refresh:
                refresh_token = f"MARKED-SECRET-refresh-{n}-{time.monotonic_ns()}"
                self.refresh_tokens.add(refresh_token)
            return access, refresh_token

    def revoke_access(self) -> None:
        with self._lock:
            self.access_tokens.clear()

    # --- the token URL ---

    def token(self, form: dict[str, str]) -> tuple[int, dict]:
        grant = form.get("grant_type")
        if grant == "authorization_code":
            with self._lock:
                issued = self.codes.pop(form.get("code", ""), None)
            if issued is None:
                return 400, {"error": "invalid_grant"}
            if self.exchange_error is not None:
                status, error = self.exchange_error
                return status, {"error": error}
            challenge, redirect_uri = issued
            verifier = form.get("code_verifier", "")
            computed = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
                .rstrip(b"=")
                .decode()
            )
            if (challenge and computed != challenge) or form.get("redirect_uri") != redirect_uri:
                return 400, {"error": "invalid_grant"}
            access, refresh_token = self.issue()
            return 200, {
                "access_token": access,
                "refresh_token": refresh_token,
                "expires_in": self.expires_in,
                "token_type": "bearer",
                "scope": "read:user",
                **self.extra_answer,
            }
        if grant == "refresh_token":
            if self.refresh_delay:
                time.sleep(self.refresh_delay)
            if self.refresh_mode == "unavailable":
                return 503, {"error": "temporarily_unavailable"}
            if self.refresh_mode == "invalid_client":
                return 401, {"error": "invalid_client"}
            if self.refresh_error is not None:
                status, error = self.refresh_error
                return status, {"ok": False, "error": error}
            with self._lock:
                old = form.get("refresh_token", "")
                if self.refresh_mode == "invalid_grant" or old not in self.refresh_tokens:
                    return 400, {"error": "invalid_grant"}
                self.refreshes += 1
                if self.rotating:
                    self.refresh_tokens.discard(old)
            access, new_refresh = self.issue(refresh=self.rotating)
            answer = {
                "access_token": access,
                "expires_in": self.expires_in,
                "token_type": "bearer",
                **self.extra_answer,
            }
            if self.send_refresh_token and new_refresh:
                answer["refresh_token"] = new_refresh
            elif self.send_refresh_token and not self.rotating:
                answer["refresh_token"] = old
            if self.stall_after_rotating:
                time.sleep(self.stall_after_rotating)
            return 200, answer
        return 400, {"error": "unsupported_grant_type"}


def _handler(stand_in: OAuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path == "/authorize":
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                code = f"code-{next(stand_in._counter)}"
                with stand_in._lock:
                    stand_in.codes[code] = (
                        query.get("code_challenge", ""),
                        query.get("redirect_uri", ""),
                    )
                back = (
                    query.get("redirect_uri", "")
                    + "?"
                    + urlencode({"code": code, "state": query.get("state", "")})
                )
                page = (
                    "<!doctype html><title>Consent</title><h1>Stand-in consent</h1>"
                    f'<a id="allow" href="{html.escape(back)}">Allow</a>'
                ).encode()
                self._send(200, page, "text/html")
                return
            if parts.path.startswith("/api/"):
                given = self.headers.get("Authorization", "").removeprefix("Bearer ")
                stand_in.api_requests.append({"path": parts.path, "token": given})
                if given in stand_in.access_tokens:
                    self._send(200, b'{"login":"octocat"}', "application/json")
                else:
                    self._send(401, b'{"message":"Bad credentials"}', "application/json")
                return
            self._send(404, b"{}", "application/json")

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_PUT(self) -> None:
            self._read_body()
            self.do_GET()

        def do_DELETE(self) -> None:
            self.do_GET()

        def _read_body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_POST(self) -> None:
            body = self._read_body().decode()
            path = urlsplit(self.path).path
            if path not in ("/token", "/refresh"):
                self._send(404, b"{}", "application/json")
                return
            form = dict(parse_qsl(body))
            headers = {k.lower(): v for k, v in self.headers.items()}
            stand_in.token_requests.append(TokenRequest(form, headers, path))
            status, answer = stand_in.token(form)
            text = json.dumps(answer)
            if stand_in.raw_expires_in is not None and "expires_in" in answer:
                placeholder = json.dumps({**answer, "expires_in": None})
                text = placeholder.replace(
                    '"expires_in": null', f'"expires_in": {stand_in.raw_expires_in}'
                )
            self._send(status, text.encode(), "application/json")

    return Handler
