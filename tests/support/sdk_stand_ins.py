"""Stand-ins of the providers whose own SDKs tests/sdks/ drive through credvault: each
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
- `LinearStandIn`, `GitHubGraphQLStandIn`: `POST /graphql`, each request (or batch) executed
  with graphql-core against a subset of the provider's schema.
- `TwilioStandIn`: `GET /2010-04-01/Accounts/{sid}/Messages.json`, by pages (`next_page_uri`).
- `JiraStandIn`: `GET /rest/api/{2,3}/myself`, `GET /rest/api/{2,3}/issue/{key}`.

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

from tests.support.stand_ins import Recorded

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


# --- Basic pairs that hold an identifier -------------------------------------------------------


class _BasicPairStandIn(SdkStandIn):
    """A provider that takes `Authorization: Basic` of an identifier (an account's id or
    e-mail address, which its answers name) and a secret: `credential` is the secret,
    `identifier` the user name."""

    def __init__(self, identifier: str, secret: str) -> None:
        super().__init__(secret)
        self.identifier = identifier

    def authorized(self, headers: dict[str, str]) -> bool:
        pair = f"{self.identifier}:{self.credential}".encode()
        return _header(headers, "Authorization") == "Basic " + base64.b64encode(pair).decode()


class TwilioStandIn(_BasicPairStandIn):
    """Twilio's 2010-04-01 REST API (https://www.twilio.com/docs/usage/api): Basic auth of the
    Account SID and the auth token. `GET /2010-04-01/Accounts/{AccountSid}/Messages.json` lists
    the account's `messages` messages newest first, `PageSize` a page (50 by default), each
    page naming the next in `next_page_uri`, a path that names the account
    (`/2010-04-01/Accounts/AC.../Messages.json?PageSize=2&Page=1&PageToken=PA...`, as
    https://www.twilio.com/docs/usage/twilios-response#pagination shows), which the SDK
    follows. A URL that names another account is 404, as Twilio answers it. The newest
    message's body echoes the Authorization header it was sent with."""

    def __init__(self, account_sid: str, auth_token: str, *, messages: int = 3) -> None:
        super().__init__(account_sid, auth_token)
        self.count = messages

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(
            401,
            {
                "code": 20003,
                "message": "Authenticate",
                "more_info": "https://www.twilio.com/docs/errors/20003",
                "status": 401,
            },
            {"WWW-Authenticate": 'Basic realm="Twilio API"'},
        )

    def _not_found(self, path: str) -> Answer:
        return Answer(
            404,
            {
                "code": 20404,
                "message": f"The requested resource {path} was not found",
                "more_info": "https://www.twilio.com/docs/errors/20404",
                "status": 404,
            },
        )

    def message(self, number: int, authorization: str) -> dict[str, Any]:
        sid = f"SM{number:032x}"
        base = f"/2010-04-01/Accounts/{self.identifier}/Messages/{sid}"
        date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(CREATED - number))
        return {
            "account_sid": self.identifier,
            "api_version": "2010-04-01",
            "body": f"Sent with {authorization}" if number == self.count else f"Hello {number}",
            "date_created": date,
            "date_sent": date,
            "date_updated": date,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": "+15005550006",
            "messaging_service_sid": None,
            "num_media": "0",
            "num_segments": "1",
            "price": "-0.00790",
            "price_unit": "USD",
            "sid": sid,
            "status": "delivered",
            "subresource_uris": {
                "media": f"{base}/Media.json",
                "feedback": f"{base}/Feedback.json",
            },
            "to": f"+1555010{number:04d}",
            "uri": f"{base}.json",
        }

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        listing = f"/2010-04-01/Accounts/{self.identifier}/Messages.json"
        if (method, parts.path) != ("GET", listing):
            return self._not_found(parts.path)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        size, page = int(query.get("PageSize", 50)), int(query.get("Page", 0))
        authorization = _header(headers, "Authorization")
        newest_first = [self.message(n, authorization) for n in range(self.count, 0, -1)]
        messages = newest_first[page * size : (page + 1) * size]

        def uri(number: int) -> str:
            token = f"&PageToken=PASM{number * size:032x}" if number else ""
            return f"{listing}?PageSize={size}&Page={number}{token}"

        last = (page + 1) * size >= self.count
        listed = {
            "end": page * size + len(messages) - 1,
            "first_page_uri": uri(0),
            "messages": messages,
            "next_page_uri": None if last else uri(page + 1),
            "page": page,
            "page_size": size,
            "previous_page_uri": uri(page - 1) if page else None,
            "start": page * size,
            "uri": uri(page),
        }
        return Answer(200, listed, {"Twilio-Request-Id": "RQ" + "0" * 32})


class JiraStandIn(_BasicPairStandIn):
    """Jira Cloud's REST API, versions 2 and 3
    (https://developer.atlassian.com/cloud/jira/platform/rest/v3/): Basic auth of the
    account's e-mail address and an API token
    (https://developer.atlassian.com/cloud/jira/platform/basic-auth-for-rest-apis/).
    `GET /rest/api/{2,3}/myself` answers the user, `emailAddress` among its members;
    `GET /rest/api/{2,3}/issue/{key}` answers issue `ISSUE_KEY`, reported by that user, whose
    description echoes the API token it was read with."""

    ISSUE_KEY = "DEMO-1"
    ACCOUNT_ID = "5b10ac8d82e05b22cc7d4ef5"

    def refusal(self, headers: dict[str, str]) -> Answer:
        message = "You are not authenticated. Authentication required to perform this operation."
        return Answer(401, {"errorMessages": [message], "errors": {}})

    def user(self, version: str) -> dict[str, Any]:
        avatar = "https://avatar-management--avatars.us-west-2.prod.public.atl-paas.net/default"
        return {
            "self": f"{self.url}/rest/api/{version}/user?accountId={self.ACCOUNT_ID}",
            "accountId": self.ACCOUNT_ID,
            "accountType": "atlassian",
            "emailAddress": self.identifier,
            "avatarUrls": {size: f"{avatar}?s={size[:2]}" for size in ("48x48", "24x24")},
            "displayName": "Mia Krystof",
            "active": True,
            "timeZone": "Australia/Sydney",
            "locale": "en_US",
            "groups": {"size": 1, "items": []},
            "applicationRoles": {"size": 1, "items": []},
            "expand": "groups,applicationRoles",
        }

    def issue(self, version: str) -> dict[str, Any]:
        return {
            "expand": "renderedFields,names,schema",
            "id": "10002",
            "self": f"{self.url}/rest/api/{version}/issue/10002",
            "key": self.ISSUE_KEY,
            "fields": {
                "summary": "The stand-in's first issue",
                "description": f"Filed with the API token {self.credential}",
                "reporter": self.user(version),
                "status": {"name": "To Do", "id": "10000"},
                "created": "2026-11-20T10:00:00.000+0000",
            },
        }

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        path = urlsplit(target).path
        for version in ("2", "3"):
            if method == "GET" and path == f"/rest/api/{version}/myself":
                return Answer(200, self.user(version))
            if method == "GET" and path == f"/rest/api/{version}/issue/{self.ISSUE_KEY}":
                return Answer(200, self.issue(version))
        message = "Issue does not exist or you do not have permission to see it."
        return Answer(404, {"errorMessages": [message], "errors": {}})


# --- Providers with more than one host -------------------------------------------------------
# Each stands in for one host of its provider; credvault reaches the others' at the bases
# (`huggingface~router`, `dropbox~content`) or the host pattern (`pinecone~host`) of the
# catalog (tests/sdks/test_sdk_provider_hosts.py).


class HuggingFaceRouterStandIn(SdkStandIn):
    """Hugging Face's Inference Providers router (https://router.huggingface.co, documented at
    https://huggingface.co/docs/inference-providers/tasks/chat-completion): the token as
    `Authorization: Bearer`, `POST /v1/chat/completions` in OpenAI's shapes. The completion's
    text echoes the token it was called with."""

    MODEL = "meta-llama/Llama-3.1-8B-Instruct"

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"error": "Invalid credentials in Authorization header"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        if (method, urlsplit(target).path) != ("POST", "/v1/chat/completions"):
            return Answer(404, {"error": "Not Found"})
        model = _json_body(body).get("model") or self.MODEL
        message = {"role": "assistant", "content": f"Hello! Called with {self.credential}."}
        return Answer(
            200,
            {
                "id": "chatcmpl-hf-standin",
                "object": "chat.completion",
                "created": CREATED,
                "model": model,
                "system_fingerprint": "fp_standin",
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 8, "total_tokens": 17},
            },
            {"x-request-id": "hf-router-stand-in"},
        )


class PineconeIndexStandIn(SdkStandIn):
    """One Pinecone index's data plane (its own host, `{index}-{project}.svc.{env}.pinecone.io`;
    https://docs.pinecone.io/reference/api/2025-10/data-plane): the key as `Api-Key`,
    `POST /vectors/upsert` (`{"upsertedCount": n}`) and `POST /query` (the stored vectors by
    dot product, best first, `topK` of them). A match's metadata echoes the key it was
    queried with."""

    def __init__(self, credential: str) -> None:
        super().__init__(credential)
        self.vectors: dict[str, dict[str, Any]] = {}

    def authorized(self, headers: dict[str, str]) -> bool:
        return _header(headers, "Api-Key") == self.credential

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"code": 16, "message": "Invalid API Key", "details": []})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        path = urlsplit(target).path
        request = _json_body(body)
        if (method, path) == ("POST", "/vectors/upsert"):
            for vector in request.get("vectors", []):
                self.vectors[vector["id"]] = vector
            return Answer(200, {"upsertedCount": len(request.get("vectors", []))})
        if (method, path) == ("POST", "/query"):
            wanted = request.get("vector") or []
            scored = sorted(
                (
                    (sum(a * b for a, b in zip(wanted, v.get("values", []), strict=False)), v)
                    for v in self.vectors.values()
                ),
                key=lambda pair: -pair[0],
            )[: int(request.get("topK", 10))]
            matches = [
                {
                    "id": vector["id"],
                    "score": score,
                    "values": [],
                    "metadata": {**vector.get("metadata", {}), "key": self.credential},
                }
                for score, vector in scored
            ]
            return Answer(
                200,
                {
                    "matches": matches,
                    "namespace": request.get("namespace", ""),
                    "usage": {"readUnits": 5},
                },
            )
        return Answer(404, {"code": 5, "message": "Not Found", "details": []})


class DropboxStandIn(SdkStandIn):
    """One of Dropbox's API hosts (https://www.dropbox.com/developers/documentation/http/
    documentation): the token as `Authorization: Bearer`. `host="api"` answers the RPC route
    `POST /2/files/list_folder` (one file); `host="content"` the download route
    `POST /2/files/download`, its argument in `Dropbox-API-Arg`, the file's metadata in
    `Dropbox-API-Result` and its bytes as the body. Each answers only its own host's routes,
    as Dropbox does. The file's text echoes the token it was read with."""

    FILE = {
        ".tag": "file",
        "name": "notes.txt",
        "id": "id:a4ayc_80_OEAAAAAAAAAXw",
        "client_modified": "2026-01-15T10:00:00Z",
        "server_modified": "2026-01-15T10:00:00Z",
        "rev": "a1c10ce0dd78",
        "size": 0,
        "path_lower": "/notes.txt",
        "path_display": "/notes.txt",
        "is_downloadable": True,
    }

    def __init__(self, credential: str, *, host: str) -> None:
        super().__init__(credential)
        self.host = host

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(
            401,
            {
                "error_summary": "invalid_access_token/...",
                "error": {".tag": "invalid_access_token"},
            },
        )

    def content(self) -> bytes:
        return f"Notes, read with {self.credential}.".encode()

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        path = urlsplit(target).path
        if self.host == "api" and (method, path) == ("POST", "/2/files/list_folder"):
            entry = {**self.FILE, "size": len(self.content())}
            return Answer(200, {"entries": [entry], "cursor": "AAGvE2", "has_more": False})
        if self.host == "content" and (method, path) == ("POST", "/2/files/download"):
            argument = json.loads(_header(headers, "Dropbox-API-Arg") or "{}")
            if argument.get("path") != self.FILE["path_lower"]:
                return Answer(
                    409,
                    {
                        "error_summary": "path/not_found/..",
                        "error": {".tag": "path", "path": {".tag": "not_found"}},
                    },
                )
            result = {**self.FILE, "size": len(self.content())}
            return Answer(
                200,
                self.content(),
                {
                    "Content-Type": "application/octet-stream",
                    "Dropbox-API-Result": json.dumps(result),
                },
            )
        return Answer(
            400, b"Error in call to API function: unknown route", {"Content-Type": "text/plain"}
        )


# --- GitHub: writing a file, adding a collaborator -------------------------------------------


class GitHubWritesStandIn(GitHubRestStandIn):
    """GitHub's REST API as `GitHubRestStandIn`, and two writes besides
    (https://docs.github.com/en/rest/repos/contents#create-or-update-file-contents,
    https://docs.github.com/en/rest/collaborators/collaborators#add-a-repository-collaborator):
    `PUT /repos/{owner}/{repo}/contents/{path}` answers 201 with the file's content and its
    commit, and `PUT /repos/{owner}/{repo}/collaborators/{username}` answers 201 with the
    invitation, as GitHub does for a person not yet a collaborator."""

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target).path.split("/")
        if method == "PUT" and parts[1:2] == ["repos"] and len(parts) > 5:
            owner, repo, kind = parts[2], parts[3], parts[4]
            if kind == "contents":
                return self.file_written(owner, repo, unquote("/".join(parts[5:])), body)
            if kind == "collaborators" and len(parts) == 6:
                return self.invitation(owner, repo, parts[5], body)
        return super().route(method, target, headers, body)

    def file_written(self, owner: str, repo: str, path: str, body: bytes) -> Answer:
        sent = _json_body(body)
        api = f"{self.url}/repos/{owner}/{repo}"
        sha = "95b966ae1c166bd92f8ae7d1c313e738c731dfc3"
        content = {
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "size": len(base64.b64decode(sent.get("content", ""))),
            "url": f"{api}/contents/{quote(path)}?ref=main",
            "html_url": f"https://github.com/{owner}/{repo}/blob/main/{path}",
            "git_url": f"{api}/git/blobs/{sha}",
            "download_url": f"https://raw.githubusercontent.com/{owner}/{repo}/main/{path}",
            "type": "file",
        }
        commit = {
            "sha": "7638417db6d59f3c431d3e1f261cc637155684cd",
            "url": f"{api}/git/commits/7638417db6d59f3c431d3e1f261cc637155684cd",
            "html_url": f"https://github.com/{owner}/{repo}/commit/7638417",
            "message": sent.get("message", ""),
            "tree": {"url": f"{api}/git/trees/691272480426f78a0138979dd3ce63b77f706feb"},
            "parents": [],
        }
        return Answer(201, {"content": content, "commit": commit}, self._headers())

    def invitation(self, owner: str, repo: str, username: str, body: bytes) -> Answer:
        invitee = {**self.simple_user(), "login": username, "id": 2}
        answer = {
            "id": 1,
            "repository": self.repository(1) | {"name": repo, "full_name": f"{owner}/{repo}"},
            "invitee": invitee,
            "inviter": self.simple_user(),
            "permissions": _json_body(body).get("permission", "push"),
            "created_at": "2026-11-01T12:00:00Z",
            "url": f"{self.url}/user/repository_invitations/1",
            "html_url": f"https://github.com/{owner}/{repo}/invitations",
        }
        return Answer(201, answer, self._headers())


# --- Replicate -------------------------------------------------------------------------------


class ReplicateStandIn(SdkStandIn):
    """Replicate's HTTP API (https://replicate.com/docs/reference/http): the token as
    `Authorization: Bearer`. `GET /v1/models` and `GET /v1/predictions` list `count` items,
    `page_size` a page, and point at the next and previous pages with absolute URLs on the
    provider's own host (`next`, `previous`), as api.replicate.com does, with an opaque
    `cursor`; each model's and prediction's own URLs are absolute too. The first model's
    description echoes the token it was called with."""

    def __init__(self, credential: str, *, count: int = 5, page_size: int = 2) -> None:
        super().__init__(credential)
        self.count = count
        self.page_size = page_size

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"title": "Unauthenticated", "detail": "Invalid token.", "status": 401})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        items = {"/v1/models": self.model, "/v1/predictions": self.prediction}.get(parts.path)
        if method != "GET" or items is None:
            return Answer(404, {"title": "Not found", "detail": "Not found.", "status": 404})
        cursor = parse_qs(parts.query).get("cursor", [""])[0]
        start = int(base64.urlsafe_b64decode(cursor.encode()).decode() or 0) if cursor else 0
        numbers = range(start, min(start + self.page_size, self.count))
        return Answer(
            200,
            {
                "next": self._page(parts.path, start + self.page_size),
                "previous": self._page(parts.path, start - self.page_size),
                "results": [items(number) for number in numbers],
            },
        )

    def _page(self, path: str, start: int) -> str | None:
        if not 0 <= start < self.count:
            return None
        cursor = base64.urlsafe_b64encode(str(start).encode()).decode()
        return f"{self.url}{path}?cursor={quote(cursor)}"

    def model(self, number: int) -> dict[str, Any]:
        name = f"model-{number}"
        return {
            "url": f"https://replicate.com/stand-in/{name}",
            "owner": "stand-in",
            "name": name,
            "description": f"Listed for {self.credential}" if number == 0 else f"Model {number}",
            "visibility": "public",
            "github_url": None,
            "paper_url": None,
            "license_url": None,
            "run_count": number,
            "cover_image_url": None,
            "default_example": None,
            "latest_version": None,
        }

    def prediction(self, number: int) -> dict[str, Any]:
        identifier = f"pred{number:04d}"
        api = f"{self.url}/v1/predictions/{identifier}"
        return {
            "id": identifier,
            "model": "stand-in/model-0",
            "version": "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa",
            "status": "succeeded",
            "input": {"prompt": "hello"},
            "output": None,
            "logs": "",
            "error": None,
            "metrics": {"predict_time": 0.1},
            "created_at": "2026-11-01T12:00:00.000000Z",
            "started_at": "2026-11-01T12:00:00.100000Z",
            "completed_at": "2026-11-01T12:00:00.200000Z",
            "urls": {
                "get": api,
                "cancel": f"{api}/cancel",
                "web": f"https://replicate.com/p/{identifier}",
            },
        }


# --- Zendesk ---------------------------------------------------------------------------------


class ZendeskStandIn(SdkStandIn):
    """Zendesk's Support API (https://developer.zendesk.com/api-reference/): an OAuth token as
    `Authorization: Bearer`. `GET /api/v2/users.json` lists `count` users, by cursor
    (`page[size]`, `page[after]`: the next page in `links.next`, `meta.has_more`) or by offset
    (`per_page`, `page`: `next_page`), every next page an absolute URL on the provider's own
    host (https://developer.zendesk.com/api-reference/introduction/pagination/), and every
    user's `url` too. The first user's notes echo the token it was called with."""

    def __init__(self, credential: str, *, count: int = 5) -> None:
        super().__init__(credential)
        self.count = count

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        return Answer(401, {"error": "Couldn't authenticate you"})

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        if (method, parts.path) != ("GET", "/api/v2/users.json"):
            return Answer(404, {"error": "InvalidEndpoint", "description": "Not found"})
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        listing = f"{self.url}/api/v2/users.json"
        if "page[size]" in query:
            size = int(query["page[size]"])
            start = int(query.get("page[after]", "0"))
            end = min(start + size, self.count)
            more = end < self.count
            return Answer(
                200,
                {
                    "users": [self.user(n) for n in range(start, end)],
                    "meta": {"has_more": more, "after_cursor": str(end), "before_cursor": None},
                    "links": {
                        "next": f"{listing}?page[size]={size}&page[after]={end}" if more else None,
                        "prev": None,
                    },
                },
            )
        per_page = int(query.get("per_page", "2"))
        page = int(query.get("page", "1"))
        start = (page - 1) * per_page
        end = min(start + per_page, self.count)
        return Answer(
            200,
            {
                "users": [self.user(n) for n in range(start, end)],
                "next_page": f"{listing}?page={page + 1}&per_page={per_page}"
                if end < self.count
                else None,
                "previous_page": None,
                "count": self.count,
            },
        )

    def user(self, number: int) -> dict[str, Any]:
        identifier = 1000 + number
        return {
            "id": identifier,
            "url": f"{self.url}/api/v2/users/{identifier}.json",
            "name": f"User {number}",
            "email": f"user{number}@example.com",
            "role": "end-user",
            "active": True,
            "notes": f"Imported with {self.credential}" if number == 0 else "",
            "created_at": "2026-11-01T12:00:00Z",
            "updated_at": "2026-11-01T12:00:00Z",
        }


# --- a download that GitHub redirects to its storage host ------------------------------------


class StorageStandIn(SdkStandIn):
    """A storage host that serves a file at a pre-signed URL (GitHub's release assets are
    redirected to one, `objects.githubusercontent.com`): no credential, the signature in the
    query. `GET` any path answers `FILE`; the requests it got show what reached it."""

    FILE = b"\x7fELF release asset bytes \x00\xff" * 64

    def authorized(self, headers: dict[str, str]) -> bool:
        return True

    def refusal(self, headers: dict[str, str]) -> Answer:
        raise NotImplementedError

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        if "X-Amz-Signature=" not in target:
            return Answer(
                403,
                b"<Error><Code>AccessDenied</Code></Error>",
                {"Content-Type": "application/xml"},
            )
        return Answer(200, self.FILE, {"Content-Type": "application/octet-stream"})


class GitHubReleaseStandIn(GitHubRestStandIn):
    """GitHub's REST API with one release asset
    (https://docs.github.com/en/rest/releases/assets#get-a-release-asset): `GET
    /repos/octocat/hello/releases/assets/1` answers the asset's JSON, or, with `Accept:
    application/octet-stream`, 302 to the file at `storage_url` (a pre-signed URL), as GitHub
    answers with its storage host."""

    def __init__(self, credential: str, *, storage_url: str) -> None:
        super().__init__(credential)
        self.storage_url = storage_url

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        if (method, urlsplit(target).path) != ("GET", "/repos/octocat/hello/releases/assets/1"):
            return super().route(method, target, headers, body)
        if _header(headers, "Accept") == "application/octet-stream":
            signed = (
                f"{self.storage_url}/releases/1/hello.tar.gz?X-Amz-Expires=300&X-Amz-Signature=5f1e"
            )
            return Answer(302, b"", {"Location": signed, **self._headers()})
        asset = {
            "url": f"{self.url}/repos/octocat/hello/releases/assets/1",
            "browser_download_url": "https://github.com/octocat/hello/releases/download/v1/hello.tar.gz",
            "id": 1,
            "node_id": "RA_standin1",
            "name": "hello.tar.gz",
            "label": "",
            "state": "uploaded",
            "content_type": "application/gzip",
            "size": len(StorageStandIn.FILE),
            "digest": None,
            "download_count": 7,
            "created_at": "2026-11-01T12:00:00Z",
            "updated_at": "2026-11-01T12:00:00Z",
            "uploader": self.simple_user(),
        }
        return Answer(200, asset, self._headers())


# --- GraphQL: Linear and GitHub ----------------------------------------------------------------


class GraphQLStandIn(SdkStandIn):
    """A provider's GraphQL endpoint (`POST {ENDPOINT}`): each request of the JSON body (one
    request object, or a batch) is executed with graphql-core against `SCHEMA`, a subset of the
    provider's own schema, and answered as the provider answers (`{"data"}`, `{"errors"}`; a
    batch as a list). `executed` names the top-level mutation fields that were run, in order."""

    ENDPOINT = "/graphql"
    SCHEMA = ""

    def __init__(self, credential: str) -> None:
        from graphql import build_schema

        super().__init__(credential)
        self.schema = build_schema(self.SCHEMA)
        self.executed: list[str] = []

    def reset(self) -> None:
        super().reset()
        self.executed.clear()

    def root(self) -> dict[str, Any]:
        """The root value: a member (or a callable of `info` and the arguments) per field."""
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json; charset=utf-8"}

    def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        if (method, urlsplit(target).path) != ("POST", self.ENDPOINT):
            return Answer(404, {"message": "Not Found"}, self._headers())
        try:
            sent = json.loads(body)
        except ValueError:
            return Answer(400, {"errors": [{"message": "Body is not JSON"}]}, self._headers())
        if isinstance(sent, list):
            return Answer(200, [self.execute(each) for each in sent], self._headers())
        return Answer(200, self.execute(sent), self._headers())

    def execute(self, request: dict[str, Any]) -> dict[str, Any]:
        from graphql import OperationDefinitionNode, OperationType, graphql_sync, parse

        document = request.get("query", "")
        try:
            parsed = parse(document)
        except Exception as exc:  # a GraphQLSyntaxError: the provider's own error answer
            return {"errors": [{"message": str(exc).splitlines()[0]}]}
        wanted = request.get("operationName")
        for operation in parsed.definitions:
            if (
                isinstance(operation, OperationDefinitionNode)
                and operation.operation == OperationType.MUTATION
                and (not wanted or (operation.name and operation.name.value == wanted))
            ):
                self.executed += [field.name.value for field in operation.selection_set.selections]
        result = graphql_sync(
            self.schema,
            document,
            root_value=self.root(),
            variable_values=request.get("variables"),
            operation_name=wanted,
        )
        return result.formatted


class LinearStandIn(GraphQLStandIn):
    """Linear's GraphQL API (https://linear.app/developers/graphql): a personal API key as
    `Authorization: <key>` (or an OAuth token as a bearer). `viewer`, `issues`, and the
    mutations `issueCreate` and `apiKeyCreate`, shaped as Linear's schema has them (their
    payloads' `success`). The viewer's name echoes the credential. A request without the key is
    answered as Linear answers it: an `errors` list with the AUTHENTICATION_ERROR code (not
    confirmed here: its HTTP status; 400 is assumed)."""

    SCHEMA = """
        type Query { viewer: User!  issues(first: Int): IssueConnection! }
        type Mutation {
          issueCreate(input: IssueCreateInput!): IssuePayload!
          apiKeyCreate(input: ApiKeyCreateInput!): ApiKeyPayload!
        }
        type User { id: ID!  name: String!  email: String! }
        type Issue { id: ID!  identifier: String!  title: String! }
        type IssueConnection { nodes: [Issue!]! }
        input IssueCreateInput { title: String!  teamId: String }
        type IssuePayload { success: Boolean!  lastSyncId: Float!  issue: Issue }
        input ApiKeyCreateInput { label: String! }
        type ApiKeyPayload { success: Boolean!  lastSyncId: Float!  apiKey: ApiKey! }
        type ApiKey { id: ID!  label: String! }
    """

    def authorized(self, headers: dict[str, str]) -> bool:
        value = _header(headers, "Authorization").strip()
        return value == self.credential or self._bearer(headers)

    def refusal(self, headers: dict[str, str]) -> Answer:
        error = {
            "message": "Authentication required, not authenticated",
            "extensions": {
                "type": "authentication error",
                "code": "AUTHENTICATION_ERROR",
                "userPresentableMessage": "You need to authenticate to access this operation.",
            },
        }
        return Answer(400, {"errors": [error]}, self._headers())

    def root(self) -> dict[str, Any]:
        issue = {"id": "8c7d-issue", "identifier": "ENG-1", "title": "First issue"}
        return {
            "viewer": {
                "id": "2d1f-user",
                "name": f"Read with {self.credential}",
                "email": "agent@example.com",
            },
            "issues": lambda info, first=50: {"nodes": [issue][:first]},
            "issueCreate": lambda info, input: {
                "success": True,
                "lastSyncId": 1.0,
                "issue": {**issue, "title": input["title"]},
            },
            "apiKeyCreate": lambda info, input: {
                "success": True,
                "lastSyncId": 2.0,
                "apiKey": {"id": "5e3a-key", "label": input["label"]},
            },
        }


class GitHubGraphQLStandIn(GraphQLStandIn):
    """GitHub's GraphQL API (https://docs.github.com/en/graphql): the token as `Authorization:
    bearer` or `token`. `viewer`, and the mutations `addStar` and `createCommitOnBranch`, with
    the input and payload shapes of GitHub's schema (trimmed to the members used here). The
    viewer's bio echoes the token. Without it: 401 `Bad credentials`, as GitHub answers."""

    SCHEMA = """
        type Query { viewer: User! }
        type User { login: String!  bio: String }
        type Mutation {
          addStar(input: AddStarInput!): AddStarPayload
          createCommitOnBranch(input: CreateCommitOnBranchInput!): CreateCommitOnBranchPayload
        }
        input AddStarInput { starrableId: ID!  clientMutationId: String }
        type AddStarPayload { clientMutationId: String  starrable: Repository }
        type Repository { id: ID!  stargazerCount: Int! }
        input CommittableBranch { repositoryNameWithOwner: String  branchName: String }
        input CommitMessage { headline: String!  body: String }
        input FileAddition { path: String!  contents: String! }
        input FileChanges { additions: [FileAddition!] }
        input CreateCommitOnBranchInput {
          branch: CommittableBranch!  expectedHeadOid: String!  message: CommitMessage!
          fileChanges: FileChanges  clientMutationId: String
        }
        type Commit { oid: String!  url: String! }
        type CreateCommitOnBranchPayload { clientMutationId: String  commit: Commit }
    """

    def authorized(self, headers: dict[str, str]) -> bool:
        return self._bearer(headers, ("bearer", "token"))

    def refusal(self, headers: dict[str, str]) -> Answer:
        body = {
            "message": "Bad credentials",
            "documentation_url": "https://docs.github.com/graphql",
        }
        return Answer(401, body, self._headers())

    def root(self) -> dict[str, Any]:
        return {
            "viewer": {"login": "octocat", "bio": f"Read with {self.credential}"},
            "addStar": lambda info, input: {
                "clientMutationId": input.get("clientMutationId"),
                "starrable": {"id": input["starrableId"], "stargazerCount": 4},
            },
            "createCommitOnBranch": lambda info, input: {
                "clientMutationId": input.get("clientMutationId"),
                "commit": {
                    "oid": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
                    "url": "https://github.com/o/r/commit/4b825dc642cb6eb9a060e54bf8d69288fbee4904",
                },
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
