"""An OAuth provider stand-in on 127.0.0.1: a consent page, a token URL
and an API, as a real provider has them, over real HTTP.

- `GET /authorize`: a consent page with an "Allow" link back to the redirect URI with a code
  (and the state); the code remembers the PKCE challenge, if one came, and the redirect URI.
- `POST /token` (and `POST /refresh`, for a provider that refreshes at a URL of its own):
  `authorization_code` (the verifier must match the challenge when one came; without a
  challenge the verifier is not looked at, as a provider without PKCE does) and
  `refresh_token`; every request is kept (`token_requests`), with its path, form and headers.
  `refresh_mode` makes refreshes fail (`invalid_grant`, `unavailable`); `refresh_error`
  answers each refresh with that status and `error` instead (`(200, "bad_client_secret")`,
  Slack's way), `exchange_error` each code exchange; `rotating` makes each refresh replace
  the refresh token and kill the old one; `send_refresh_token = False` leaves it out of
  refresh answers; `refresh_delay` holds each refresh that long; `extra_answer` adds members
  to every token answer (`instance_url`); `stall_after_rotating` holds each refresh's answer
  that long after the refresh token was replaced (a provider that rotates, then answers
  late); `raw_expires_in` is the `expires_in` member of every token answer, as that JSON text
  exactly (`1e400`).
- `GET /api/...`: 200 with the current access token as Bearer, else 401.
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
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit


@dataclass
class TokenRequest:
    form: dict[str, str]
    headers: dict[str, str]
    path: str = "/token"


@dataclass
class OAuthServer:
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
