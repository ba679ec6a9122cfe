"""Stand-ins of the providers whose own SDKs tests/test_sdks.py drives through credvault: each
is a real HTTP server on 127.0.0.1, in a thread of the process that starts it, that answers the
calls the tests make as the provider documents them (its paths, JSON shapes, headers and
Server-Sent Events framing), records every request it receives exactly as it came (`requests`),
and refuses a request that does not carry the stored credential in the provider's own place,
with the provider's own refusal.

- `OpenAIStandIn`: `GET /v1/models`, `POST /v1/chat/completions`, streamed or not.
- `AnthropicStandIn`: `POST /v1/messages`, streamed or not.
- `SlackStandIn`: `auth.test`, `chat.postMessage`.
- `StripeStandIn`: `GET /v1/customers`, by pages (`limit`, `starting_after`, `has_more`).
- `GitHubRestStandIn`: `GET /user`, `GET /user/repos` by pages (a `Link` header to its own host).
- `GitLabStandIn`: `GET /api/v4/projects/:id`, the id a number or a URL-encoded path.

Each echoes the credential it was called with in one free-text member (a completion's text, a
user's bio, a project's description...), as a careless API might, so that a test sees credvault
redact it. A streamed answer is sent chunked, one event a chunk, `event_seconds` apart; the
time each chunk was written is kept (`sent_at`), and `stream_ended` is set after the last.

Only loopback addresses are ever used.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from scripts.stand_ins import Recorded

JSON = "application/json"
EVENT_STREAM = "text/event-stream; charset=utf-8"
# A fixed time for every `created` member: answers the same on every run.
CREATED = 1764064800


@dataclass
class Answer:
    """One answer of a stand-in: whole (`body`, JSON unless bytes), or, when `events` is not
    empty, streamed chunked, one event a chunk, `event_seconds` apart (the first at once)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: tuple[bytes, ...] = ()
    event_seconds: float = 0.0

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()


def carries(request: Recorded, value: str) -> bool:
    """Whether `request` holds `value` anywhere: a header's name or value, the path and query,
    or the body; as it is, percent-encoded, or in base64 (alone, or as either half of a Basic
    pair)."""
    forms = {value, quote(value, safe=""), base64.b64encode(value.encode()).decode()}
    for pair in (f"{value}:", f":{value}", f"{value}:x", f"x:{value}"):
        forms.add(base64.b64encode(pair.encode()).decode())
    text = "\n".join(
        [
            request.path,
            unquote(request.path),
            *(f"{name}: {header}" for name, header in request.headers.items()),
            request.body.decode("latin-1"),
        ]
    )
    return any(form in text for form in forms)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing a kept-alive connection is normal here, not worth a traceback."""


class SdkStandIn:
    """A provider on 127.0.0.1 for one SDK. A subclass says where the credential goes
    (`authorized`), how the provider refuses a request without it (`refusal`), and how it
    answers each call (`route`)."""

    def __init__(self, credential: str) -> None:
        self.credential = credential
        self.requests: list[Recorded] = []
        self.sent_at: list[float] = []
        # Set once a streamed answer's last chunk has been written.
        self.stream_ended = threading.Event()
        self.stopped = threading.Event()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                body = self._body()
                headers = dict(self.headers.items())
                stand_in.requests.append(
                    Recorded(self.command, self.path, headers, body, self.client_address[1])
                )
                if stand_in.authorized(headers):
                    answer = stand_in.route(self.command, self.path, headers, body)
                else:
                    answer = stand_in.refusal(headers)
                if answer.events:
                    self._stream(answer)
                else:
                    self._whole(answer)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = bytearray()
                    while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                        body += self.rfile.read(size)
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(body)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _whole(self, answer: Answer) -> None:
                data = answer.encoded()
                self.send_response(answer.status)
                headers = {"Content-Type": JSON, **answer.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _stream(self, answer: Answer) -> None:
                self.send_response(answer.status)
                headers = {"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
                for name, value in {**headers, **answer.headers}.items():
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for number, event in enumerate(answer.events):
                        if number and stand_in.stopped.wait(answer.event_seconds):
                            return
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                        stand_in.sent_at.append(time.monotonic())
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    stand_in.stream_ended.set()
                except OSError:
                    self.close_connection = True

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # --- control ---

    def start(self) -> SdkStandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        """Forget the requests and send times recorded so far."""
        self.requests.clear()
        self.sent_at.clear()
        self.stream_ended.clear()

    # --- what a provider says ---

    def authorized(self, headers: dict[str, str]) -> bool:
        """Whether the request carries the stored credential where the provider reads it."""
        raise NotImplementedError

    def refusal(self, headers: dict[str, str]) -> Answer:
        """The provider's answer to a request without its credential."""
        raise NotImplementedError

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        """The provider's answer to an authorized request (`target`: path and query, as sent)."""
        raise NotImplementedError

    def _bearer(self, headers: dict[str, str], schemes: tuple[str, ...] = ("bearer",)) -> bool:
        scheme, _, token = _header(headers, "Authorization").partition(" ")
        return scheme.lower() in schemes and token.strip() == self.credential


def _header(headers: dict[str, str], name: str) -> str:
    """A header's value, its name matched in any case ('' when absent)."""
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), "")


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _sse(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event: an optional `event:` line, a `data:` line, a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


# --- OpenAI ----------------------------------------------------------------------------------


class OpenAIStandIn(SdkStandIn):
    """OpenAI's API (https://platform.openai.com/docs/api-reference): the key as
    `Authorization: Bearer`. A streamed chat completion is `chat.completion.chunk` objects,
    each a `data:` event, then `data: [DONE]`; `stream_chunks` of them, `chunk_seconds`
    apart. The completion's text echoes the key it was called with."""

    MODEL = "gpt-4o-mini-2024-07-18"

    def __init__(self, credential: str, *, chunk_seconds: float = 0.4) -> None:
        super().__init__(credential)
        self.chunk_seconds = chunk_seconds

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        error = {
            "message": "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
        return Answer(401, {"error": error}, self._headers())

    def _headers(self) -> dict[str, str]:
        return {"x-request-id": "req_openai_stand_in", "openai-processing-ms": "12"}

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        path = urlsplit(target).path
        if (method, path) == ("GET", "/v1/models"):
            models = [
                {"id": name, "object": "model", "created": CREATED, "owned_by": "system"}
                for name in ("gpt-4o-mini", "gpt-4o")
            ]
            return Answer(200, {"object": "list", "data": models}, self._headers())
        if (method, path) == ("POST", "/v1/chat/completions"):
            request = _json_body(body)
            if request.get("stream"):
                return Answer(
                    200,
                    headers=self._headers(),
                    events=self.completion_chunks(),
                    event_seconds=self.chunk_seconds,
                )
            return Answer(200, self.completion(), self._headers())
        return Answer(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})

    def completion(self) -> dict[str, Any]:
        message = {
            "role": "assistant",
            "content": f"Hello! You called me with {self.credential}.",
            "refusal": None,
            "annotations": [],
        }
        return {
            "id": "chatcmpl-standin1",
            "object": "chat.completion",
            "created": CREATED,
            "model": self.MODEL,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
            "service_tier": "default",
            "system_fingerprint": "fp_standin",
        }

    # The text of the streamed completion, one piece a chunk (the role and the end besides).
    STREAMED_PIECES = ("Hello", " from", " the", " stand-in")

    def completion_chunks(self) -> tuple[bytes, ...]:
        """Six chunk events (the role, four pieces of text, the end), then `[DONE]`."""
        deltas = [{"role": "assistant", "content": "", "refusal": None}]
        deltas += [{"content": piece} for piece in self.STREAMED_PIECES]
        deltas.append({})
        events = []
        for number, delta in enumerate(deltas):
            last = number == len(deltas) - 1
            chunk = {
                "id": "chatcmpl-standin2",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": self.MODEL,
                "system_fingerprint": "fp_standin",
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": "stop" if last else None,
                    }
                ],
            }
            events.append(_sse(chunk))
        events.append(_sse("[DONE]"))
        return tuple(events)


# --- Anthropic -------------------------------------------------------------------------------


class AnthropicStandIn(SdkStandIn):
    """Anthropic's Messages API (https://docs.anthropic.com/en/api/messages): the key in
    `x-api-key`, an `anthropic-version` header required. A streamed message is the events
    message_start, content_block_start, ping, content_block_delta (one a piece of text),
    content_block_stop, message_delta and message_stop, each with its `event:` line. The
    message's text echoes the key it was called with."""

    MODEL = "claude-sonnet-5-5"
    STREAMED_PIECES = ("Hello", " from", " the", " stand-in")

    def authorized(self, headers: dict[str, str]) -> bool:
        return _header(headers, "x-api-key") == self.credential

    def refusal(self, headers: dict[str, str]) -> Answer:
        return self._error(401, "authentication_error", "invalid x-api-key")

    def _error(self, status: int, kind: str, message: str) -> Answer:
        body = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_anthropic_stand_in",
        }
        return Answer(status, body, {"request-id": "req_anthropic_stand_in"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        if (method, urlsplit(target).path) != ("POST", "/v1/messages"):
            return self._error(404, "not_found_error", "Not found")
        if not _header(headers, "anthropic-version"):
            return self._error(
                400, "invalid_request_error", "anthropic-version: header is required"
            )
        request = _json_body(body)
        answer_headers = {"request-id": "req_anthropic_stand_in"}
        if request.get("stream"):
            return Answer(200, headers=answer_headers, events=self.message_events(request))
        return Answer(200, self.message(request), answer_headers)

    def message(self, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "msg_standin1",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", self.MODEL),
            "content": [{"type": "text", "text": f"Hello! You called me with {self.credential}."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 9},
        }

    def message_events(self, request: dict[str, Any]) -> tuple[bytes, ...]:
        started = {
            "id": "msg_standin2",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", self.MODEL),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        }
        events = [
            _sse({"type": "message_start", "message": started}, "message_start"),
            _sse(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                "content_block_start",
            ),
            _sse({"type": "ping"}, "ping"),
        ]
        for piece in self.STREAMED_PIECES:
            delta = {"type": "text_delta", "text": piece}
            events.append(
                _sse(
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                    "content_block_delta",
                )
            )
        events += [
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 4},
                },
                "message_delta",
            ),
            _sse({"type": "message_stop"}, "message_stop"),
        ]
        return tuple(events)


# --- Slack -----------------------------------------------------------------------------------


class SlackStandIn(SdkStandIn):
    """Slack's Web API (https://docs.slack.dev/apis/web-api/): methods under `/api/`, the token
    as `Authorization: Bearer`, arguments as a form or JSON. As Slack does, a request without
    the token is answered 200 with `ok: false` (`not_authed`, or `invalid_auth` for another
    token), never 401. auth.test's `user` echoes the token it was called with."""

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        error = "invalid_auth" if _header(headers, "Authorization") else "not_authed"
        return self._answer({"ok": False, "error": error})

    def _answer(self, body: dict[str, Any]) -> Answer:
        return Answer(200, body, {"Content-Type": "application/json; charset=utf-8"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        arguments = {name: values[0] for name, values in parse_qs(parts.query).items()}
        if "json" in _header(headers, "Content-Type"):
            arguments.update(_json_body(body))
        else:
            arguments.update({k: v[0] for k, v in parse_qs(body.decode("latin-1")).items()})
        if parts.path == "/api/auth.test":
            return self._answer(
                {
                    "ok": True,
                    "url": "https://example-team.slack.com/",
                    "team": "Example Team",
                    "user": f"bot with {self.credential}",
                    "team_id": "T0EXAMPLE",
                    "user_id": "U0EXAMPLE",
                    "bot_id": "B0EXAMPLE",
                    "is_enterprise_install": False,
                }
            )
        if parts.path == "/api/chat.postMessage":
            channel = arguments.get("channel")
            if not channel:
                return self._answer({"ok": False, "error": "channel_not_found"})
            ts = "1764064800.000100"
            message = {
                "type": "message",
                "subtype": "bot_message",
                "text": arguments.get("text", ""),
                "bot_id": "B0EXAMPLE",
                "ts": ts,
            }
            return self._answer({"ok": True, "channel": channel, "ts": ts, "message": message})
        return self._answer({"ok": False, "error": "unknown_method"})


# --- Stripe ----------------------------------------------------------------------------------


class StripeStandIn(SdkStandIn):
    """Stripe's API (https://docs.stripe.com/api): the secret key as `Authorization: Bearer`.
    `GET /v1/customers` lists `customers` customers newest first, `limit` a page (10 by
    default), the next page after `starting_after`, `has_more` saying whether one follows.
    The newest customer's description echoes the key it was called with."""

    def __init__(self, credential: str, *, customers: int = 5) -> None:
        super().__init__(credential)
        self.customers = [self.customer(number) for number in range(customers, 0, -1)]

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        error = {"message": "Invalid API Key provided.", "type": "invalid_request_error"}
        return Answer(401, {"error": error}, self._headers(headers))

    def _headers(self, headers: dict[str, str]) -> dict[str, str]:
        version = _header(headers, "Stripe-Version") or "2026-10-28.endive"
        return {"Request-Id": "req_stripe_stand_in", "Stripe-Version": version}

    def customer(self, number: int) -> dict[str, Any]:
        newest = number == 1
        return {
            "id": f"cus_standin{number:04d}",
            "object": "customer",
            "address": None,
            "balance": 0,
            "created": CREATED - number,
            "currency": None,
            "default_source": None,
            "delinquent": False,
            "description": f"Created with {self.credential}" if newest else None,
            "email": f"customer{number}@example.com",
            "invoice_prefix": f"STANDIN{number:02d}",
            "invoice_settings": {
                "custom_fields": None,
                "default_payment_method": None,
                "footer": None,
                "rendering_options": None,
            },
            "livemode": False,
            "metadata": {},
            "name": f"Customer {number}",
            "phone": None,
            "preferred_locales": [],
            "shipping": None,
            "tax_exempt": "none",
            "test_clock": None,
        }

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        if (method, parts.path) != ("GET", "/v1/customers"):
            error = {
                "message": f"Unrecognized request URL ({method}: {parts.path}).",
                "type": "invalid_request_error",
            }
            return Answer(404, {"error": error}, self._headers(headers))
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        limit = int(query.get("limit", 10))
        ordered = sorted(self.customers, key=lambda customer: -customer["created"])
        start = 0
        if after := query.get("starting_after"):
            start = next(i for i, c in enumerate(ordered) if c["id"] == after) + 1
        page = ordered[start : start + limit]
        listed = {
            "object": "list",
            "url": "/v1/customers",
            "has_more": start + limit < len(ordered),
            "data": page,
        }
        return Answer(200, listed, self._headers(headers))


# --- GitHub ----------------------------------------------------------------------------------


class GitHubRestStandIn(SdkStandIn):
    """GitHub's REST API (https://docs.github.com/en/rest): the token as `Authorization: token`
    or `Bearer`. `GET /user` answers the user (its bio echoes the token it was called with);
    `GET /user/repos` lists `repositories` repositories, `per_page` a page (30 by default),
    and points at the next page with a `Link` header to its own host, as GitHub does with
    api.github.com. Every URL member of an answer names its own host too."""

    def __init__(self, credential: str, *, repositories: int = 3) -> None:
        super().__init__(credential)
        self.repository_count = repositories

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers, ("bearer", "token"))

    def refusal(self, headers: dict[str, str]) -> Answer:
        body = {
            "message": "Bad credentials",
            "documentation_url": "https://docs.github.com/rest",
            "status": "401",
        }
        return Answer(401, body, self._headers())

    def _headers(self) -> dict[str, str]:
        return {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Request-Id": "0000:STANDIN:0001",
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "4999",
            "X-RateLimit-Reset": str(CREATED + 3600),
            "X-RateLimit-Used": "1",
            "X-RateLimit-Resource": "core",
        }

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        if method == "GET" and parts.path == "/user":
            return Answer(200, self.user(), self._headers())
        if method == "GET" and parts.path == "/user/repos":
            query = {name: values[0] for name, values in parse_qs(parts.query).items()}
            return self.repositories(int(query.get("page", 1)), int(query.get("per_page", 30)))
        body_404 = {
            "message": "Not Found",
            "documentation_url": "https://docs.github.com/rest",
            "status": "404",
        }
        return Answer(404, body_404, self._headers())

    def repositories(self, page: int, per_page: int) -> Answer:
        numbers = range(1, self.repository_count + 1)
        pages = max(1, -(-len(numbers) // per_page))
        listed = [self.repository(n) for n in numbers[(page - 1) * per_page : page * per_page]]
        headers = self._headers()
        link = f"{self.url}/user/repos?per_page={per_page}&page="
        relations = []
        if page < pages:
            relations += [f'<{link}{page + 1}>; rel="next"', f'<{link}{pages}>; rel="last"']
        if page > 1:
            relations += [f'<{link}{page - 1}>; rel="prev"', f'<{link}1>; rel="first"']
        if relations:
            headers["Link"] = ", ".join(relations)
        return Answer(200, listed, headers)

    def simple_user(self) -> dict[str, Any]:
        api = f"{self.url}/users/octocat"
        return {
            "login": "octocat",
            "id": 583231,
            "node_id": "MDQ6VXNlcjU4MzIzMQ==",
            "avatar_url": "https://avatars.githubusercontent.com/u/583231?v=4",
            "gravatar_id": "",
            "url": api,
            "html_url": "https://github.com/octocat",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": "User",
            "user_view_type": "public",
            "site_admin": False,
        }

    def user(self) -> dict[str, Any]:
        return {
            **self.simple_user(),
            "name": "The Octocat",
            "company": "@github",
            "blog": "https://github.blog",
            "location": "San Francisco",
            "email": None,
            "hireable": None,
            "bio": f"Signed in with {self.credential}",
            "twitter_username": None,
            "public_repos": self.repository_count,
            "public_gists": 8,
            "followers": 20,
            "following": 0,
            "created_at": "2011-01-25T18:44:36Z",
            "updated_at": "2026-11-01T12:00:00Z",
        }

    def repository(self, number: int) -> dict[str, Any]:
        name = f"repo-{number}"
        api = f"{self.url}/repos/octocat/{name}"
        urls = {
            "archive_url": "/{archive_format}{/ref}",
            "assignees_url": "/assignees{/user}",
            "blobs_url": "/git/blobs{/sha}",
            "branches_url": "/branches{/branch}",
            "collaborators_url": "/collaborators{/collaborator}",
            "comments_url": "/comments{/number}",
            "commits_url": "/commits{/sha}",
            "compare_url": "/compare/{base}...{head}",
            "contents_url": "/contents/{+path}",
            "contributors_url": "/contributors",
            "deployments_url": "/deployments",
            "downloads_url": "/downloads",
            "events_url": "/events",
            "forks_url": "/forks",
            "git_commits_url": "/git/commits{/sha}",
            "git_refs_url": "/git/refs{/sha}",
            "git_tags_url": "/git/tags{/sha}",
            "hooks_url": "/hooks",
            "issue_comment_url": "/issues/comments{/number}",
            "issue_events_url": "/issues/events{/number}",
            "issues_url": "/issues{/number}",
            "keys_url": "/keys{/key_id}",
            "labels_url": "/labels{/name}",
            "languages_url": "/languages",
            "merges_url": "/merges",
            "milestones_url": "/milestones{/number}",
            "notifications_url": "/notifications{?since,all,participating}",
            "pulls_url": "/pulls{/number}",
            "releases_url": "/releases{/id}",
            "stargazers_url": "/stargazers",
            "statuses_url": "/statuses/{sha}",
            "subscribers_url": "/subscribers",
            "subscription_url": "/subscription",
            "tags_url": "/tags",
            "teams_url": "/teams",
            "trees_url": "/git/trees{/sha}",
        }
        return {
            "id": 1296269 + number,
            "node_id": f"MDEwOlJlcG9zaXRvcnkx{number}",
            "name": name,
            "full_name": f"octocat/{name}",
            "private": False,
            "owner": self.simple_user(),
            "html_url": f"https://github.com/octocat/{name}",
            "description": f"Repository number {number}",
            "fork": False,
            "url": api,
            **{member: api + rest for member, rest in urls.items()},
            "git_url": f"git://github.com/octocat/{name}.git",
            "ssh_url": f"git@github.com:octocat/{name}.git",
            "clone_url": f"https://github.com/octocat/{name}.git",
            "svn_url": f"https://github.com/octocat/{name}",
            "mirror_url": None,
            "homepage": None,
            "language": "Python",
            "forks_count": 0,
            "forks": 0,
            "stargazers_count": number,
            "watchers_count": number,
            "watchers": number,
            "size": 108,
            "default_branch": "main",
            "open_issues_count": 0,
            "open_issues": 0,
            "is_template": False,
            "topics": [],
            "has_issues": True,
            "has_projects": True,
            "has_wiki": True,
            "has_pages": False,
            "has_downloads": True,
            "has_discussions": False,
            "archived": False,
            "disabled": False,
            "visibility": "public",
            "license": None,
            "pushed_at": "2026-11-01T12:00:00Z",
            "created_at": "2011-01-26T19:01:12Z",
            "updated_at": "2026-11-01T12:00:00Z",
            "permissions": {
                "admin": True,
                "maintain": True,
                "push": True,
                "triage": True,
                "pull": True,
            },
        }


# --- GitLab ----------------------------------------------------------------------------------


class GitLabStandIn(SdkStandIn):
    """GitLab's REST API (https://docs.gitlab.com/api/rest/): the token in `PRIVATE-TOKEN`.
    `GET /api/v4/projects/:id` answers the project `group/name` (id 42) when `:id` is its
    number or its path URL-encoded as one segment (`group%2Fname`), as GitLab requires; a path
    whose `/` came decoded is another route, 404. The description echoes the token it was
    called with."""

    PROJECT_PATH = "group/name"
    PROJECT_ID = 42

    def authorized(self, headers: dict[str, str]) -> bool:
        return _header(headers, "PRIVATE-TOKEN") == self.credential

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"message": "401 Unauthorized"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        raw_path = urlsplit(target).path
        prefix = "/api/v4/projects/"
        if method == "GET" and raw_path.startswith(prefix):
            identifier = raw_path[len(prefix) :]
            if "/" not in identifier and unquote(identifier) in (
                self.PROJECT_PATH,
                str(self.PROJECT_ID),
            ):
                return Answer(200, self.project())
            return Answer(404, {"message": "404 Project Not Found"})
        return Answer(404, {"error": "404 Not Found"})

    def project(self) -> dict[str, Any]:
        web = f"{self.url}/{self.PROJECT_PATH}"
        api = f"{self.url}/api/v4/projects/{self.PROJECT_ID}"
        return {
            "id": self.PROJECT_ID,
            "description": f"Read with {self.credential}",
            "name": "name",
            "name_with_namespace": "group / name",
            "path": "name",
            "path_with_namespace": self.PROJECT_PATH,
            "created_at": "2026-01-15T10:00:00.000Z",
            "default_branch": "main",
            "tag_list": [],
            "topics": [],
            "ssh_url_to_repo": f"git@gitlab.example:{self.PROJECT_PATH}.git",
            "http_url_to_repo": f"{web}.git",
            "web_url": web,
            "readme_url": f"{web}/-/blob/main/README.md",
            "forks_count": 0,
            "star_count": 3,
            "last_activity_at": "2026-11-01T12:00:00.000Z",
            "namespace": {
                "id": 7,
                "name": "group",
                "path": "group",
                "kind": "group",
                "full_path": "group",
                "parent_id": None,
                "web_url": f"{self.url}/groups/group",
            },
            "visibility": "private",
            "_links": {
                "self": api,
                "issues": f"{api}/issues",
                "merge_requests": f"{api}/merge_requests",
                "repo_branches": f"{api}/repository/branches",
                "labels": f"{api}/labels",
                "events": f"{api}/events",
                "members": f"{api}/members",
            },
        }


# --- headers meant for credvault or its proxy ------------------------------------------------


class _Gated:
    """A stream's events, the second and later written only once `gate` is set (or the
    stand-in stops): a test sees the first arrive while the provider still holds the rest."""

    def __init__(self, events: tuple[bytes, ...], gate: threading.Event, stopped: threading.Event):
        self.events, self.gate, self.stopped = events, gate, stopped

    def __bool__(self) -> bool:
        return bool(self.events)

    def __iter__(self):
        for number, event in enumerate(self.events):
            if number == 1:
                while not (self.gate.wait(0.05) or self.stopped.is_set()):
                    pass
            yield event


class ProxyHeadersStandIn(SdkStandIn):
    """A provider whose answers carry headers meant for credvault or for the proxy in front of
    it: `X-Accel-Redirect` to an internal location of the shipped nginx configuration
    (`REDIRECT`), the other `X-Accel-*`, and `X-Credvault-Error: spoof`. The key is a bearer.
    `GET /stream` is an event stream whose first event is padded past any redaction hold-back
    and whose second waits for `gate`; any other path is a JSON answer."""

    REDIRECT = "/_credvault/413"
    BODY = {"from": "the provider"}

    def __init__(self, credential: str) -> None:
        super().__init__(credential)
        self.gate = threading.Event()

    def reset(self) -> None:
        super().reset()
        self.gate.clear()

    @property
    def meant_for_others(self) -> dict[str, str]:
        return {
            "X-Accel-Redirect": self.REDIRECT,
            "X-Accel-Buffering": "yes",
            "X-Accel-Limit-Rate": "100",
            "X-Accel-Expires": "600",
            "X-Accel-Charset": "koi8-r",
            "X-Credvault-Error": "spoof",
            "X-Credvault-Request-Id": "spoofed",
            "X-Provider-Own": "kept",
        }

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"message": "Bad credentials"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        if urlsplit(target).path == "/stream":
            first = b": " + b"p" * 2048 + b"\n" + _sse({"n": 1})
            events = (first, _sse({"n": 2}), _sse({"n": 3}))
            gated = _Gated(events, self.gate, self.stopped)
            return Answer(200, headers=self.meant_for_others, events=gated)  # type: ignore[arg-type]
        return Answer(200, self.BODY, self.meant_for_others)


# --- Telegram --------------------------------------------------------------------------------


class TelegramStandIn(SdkStandIn):
    """The Telegram Bot API (https://core.telegram.org/bots/api): the bot's token in the path,
    `/bot<token>/<method>`, parameters as a form or JSON; every answer `{"ok": ..., "result":
    ...}`, a wrong token 401 `Unauthorized`. `getMe` and `sendMessage`; the message's text
    echoes the token it was called with."""

    def authorized(self, headers: dict[str, str]) -> bool:
        return True  # the token is in the path: `route` judges it

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        head = f"/bot{self.credential}/"
        path = unquote(urlsplit(target).path)
        if not path.startswith(head):
            return self.refusal(headers)
        name = path[len(head) :].lower()
        if _header(headers, "Content-Type").startswith("application/json"):
            params = {key: str(value) for key, value in _json_body(body).items()}
        else:
            params = {key: values[0] for key, values in parse_qs(body.decode()).items()}
        if name == "getme":
            user = {"id": 4242, "is_bot": True, "first_name": "Stand-in", "username": "stand_bot"}
            return Answer(200, {"ok": True, "result": user})
        if name == "sendmessage":
            message = {
                "message_id": 7,
                "date": CREATED,
                "chat": {"id": int(params.get("chat_id", "0")), "type": "private"},
                "text": f"{params.get('text', '')} (sent with {self.credential})",
            }
            return Answer(200, {"ok": True, "result": message})
        return Answer(404, {"ok": False, "error_code": 404, "description": "Not Found"})
