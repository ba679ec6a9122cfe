"""The verification engine: one catalog check, one HTTP request, one verdict.

The client is strict (CONTRACT 5): it never follows a redirect, verifies TLS, ignores proxy,
CA-bundle and netrc settings from the environment, bounds the whole call by
CREDVAULT_VERIFY_TIMEOUT (a watchdog shuts the sockets down when it passes, because per-read
timeouts never trip on a server that drips one byte a second), reads at most 64 KiB of the
answer, never retries, and turns every failure into a reason without passing an exception's
text (which can hold a URL or a header) to a log or a caller. Only the catalog's host, or its
server-side override from CREDVAULT_PROVIDER_BASE_URLS, is ever contacted.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Protocol
from urllib.parse import quote, urlsplit

import requests
import urllib3
from django.conf import settings
from requests.adapters import HTTPAdapter

from providers import catalog
from providers.catalog import Check

logger = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "credvault-verifier/1"


class Reason(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    NO_VERIFIER = "no_verifier"


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason

    @property
    def ok(self) -> bool:
        return self.reason in (Reason.ACCEPTED, Reason.NO_VERIFIER)

    @property
    def verified(self) -> bool:
        return self.reason is Reason.ACCEPTED


class Revealable(Protocol):
    """A masked plaintext value (services.masking.Secret) as the engine needs it."""

    def reveal(self) -> str: ...


# --- server-side base URL overrides ---------------------------------------------------------


class BaseUrlError(ValueError):
    pass


@lru_cache(maxsize=4)
def parse_base_urls(raw: str) -> Mapping[str, str]:
    """Parse CREDVAULT_PROVIDER_BASE_URLS: a JSON object of provider id to http(s) base URL."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        raise BaseUrlError("CREDVAULT_PROVIDER_BASE_URLS is not valid JSON") from None
    if not isinstance(data, dict):
        raise BaseUrlError("CREDVAULT_PROVIDER_BASE_URLS must be a JSON object")
    for provider_id, url in data.items():
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_BASE_URLS[{provider_id!r}] must be an http(s) URL"
            )
        if parts.query or parts.fragment or parts.username or parts.password:
            raise BaseUrlError(
                f"CREDVAULT_PROVIDER_BASE_URLS[{provider_id!r}] must hold no query, "
                "fragment or user info"
            )
    return dict(data)


def base_url_for(provider: catalog.Provider) -> str | None:
    """The base URL to verify against: the server-side override, else the catalog's fixed
    one; None for a per-customer host that the operator has not configured."""
    return parse_base_urls(settings.CREDVAULT_PROVIDER_BASE_URLS).get(
        provider.id, provider.base_url
    )


def can_verify(provider: catalog.Provider, shape: catalog.Shape) -> bool:
    """Whether a set of this shape gets a real check here (else `no_verifier`)."""
    return shape.check is not None and base_url_for(provider) is not None


# --- the whole-call deadline ----------------------------------------------------------------


class _Watchdog:
    """Shuts down every socket of one call when its deadline passes.

    Each socket is watched through a duplicate of it: shutting the duplicate down ends the
    connection for the original too (a blocked read returns at once), and the duplicate's own
    descriptor cannot be reused by anything else before `finish()` closes it.
    """

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._finished = False
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self.fired or self._finished:
                # Opened after the deadline (a name lookup that hung past it): the connection
                # must carry nothing, so it ends before a byte of the request is sent.
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                return
            self._sockets.append(sock.dup())

    def _shutdown_all(self) -> None:
        for sock in self._sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _fire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.fired = True
            self._shutdown_all()

    def finish(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._finished = True
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


_watchdog: ContextVar[_Watchdog | None] = ContextVar("credvault_verify_watchdog", default=None)


class _WatchedConnectionMixin:
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        watchdog = _watchdog.get()
        if watchdog is not None:
            watchdog.watch(sock)
        return sock


class _WatchedHTTPConnection(_WatchedConnectionMixin, urllib3.connection.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_WatchedConnectionMixin, urllib3.connection.HTTPSConnection):
    pass


class _WatchedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class _WatchedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _WatchedHTTPPool,
            "https": _WatchedHTTPSPool,
        }


def _strict_session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxy, CA bundle or netrc from the environment
    session.max_redirects = 0
    adapter = _WatchedAdapter(max_retries=0)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


# --- building the request -------------------------------------------------------------------


class _Unsendable(Exception):
    """A credential value cannot travel in an HTTP header (a control or non-ASCII character)."""


def _header_safe(value: str) -> str:
    if not value or not value.isascii() or not value.isprintable():
        raise _Unsendable
    return value


def _headers(check: Check, fields: Mapping[str, Revealable]) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    headers.update(check.headers)
    if check.body is not None:
        headers["Content-Type"] = check.content_type
    auth = check.auth
    if auth.type == "bearer":
        headers["Authorization"] = "Bearer " + _header_safe(fields[auth.field].reveal())
    elif auth.type == "header":
        headers[auth.header] = auth.prefix + _header_safe(fields[auth.field].reveal())
    elif auth.type == "basic":
        username = fields[auth.username].reveal() if auth.username else auth.username_value
        password = fields[auth.password].reveal() if auth.password in fields else ""
        pair = f"{username}:{password}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    return headers


def _path(check: Check, fields: Mapping[str, Revealable]) -> str:
    """The check's path; a flagged check carries its credential in it (Telegram's bot token),
    percent-encoded and never logged."""
    if not check.credential_in_url:
        return check.path
    value = _header_safe(fields[check.auth.field].reveal())
    return check.path.replace("{" + check.auth.field + "}", quote(value, safe=":"))


def _read_limited(response: requests.Response) -> bytes | None:
    """At most MAX_ANSWER_BYTES of the body, or None when it is longer."""
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=8192):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _judge(check: Check, response: requests.Response) -> Reason:
    status = response.status_code
    if status in (401, 403):
        return Reason.REJECTED
    if not 200 <= status < 300:
        # Redirects (never followed), 429, 5xx and anything unexpected.
        return Reason.PROVIDER_UNAVAILABLE
    if check.accept_json is None:
        return Reason.ACCEPTED
    body = _read_limited(response)
    try:
        document = json.loads(body) if body is not None else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return Reason.PROVIDER_UNAVAILABLE
    return Reason.ACCEPTED if check.accept_json.holds(document) else Reason.REJECTED


# How long after the deadline the caller waits for the exchange to unwind by itself.
UNWIND_SECONDS = 0.25


def _exchange(
    check: Check, url: str, headers: dict[str, str], timeout: float, watchdog: _Watchdog
) -> tuple[Reason, str]:
    """The request and its judgement, on the verification thread: (reason, status for the log)."""
    token = _watchdog.set(watchdog)
    session = _strict_session()
    try:
        body = check.body.encode() if check.body is not None else b""
        response = session.request(
            check.method,
            url,
            headers=headers,
            data=body if check.method == "POST" else None,
            allow_redirects=False,
            stream=True,
            verify=True,
            timeout=(timeout, timeout),
        )
        with response:
            return _judge(check, response), str(response.status_code)
    except Exception as exc:  # every failure is a reason, never a 500
        return Reason.PROVIDER_UNAVAILABLE, type(exc).__name__
    finally:
        watchdog.finish()
        session.close()
        _watchdog.reset(token)


def run_check(
    provider: catalog.Provider, check: Check, fields: Mapping[str, Revealable], timeout: float
) -> Reason:
    """Send the check's one request and judge the answer within `timeout` seconds.

    The exchange runs on its own thread so that nothing can hold the caller past the deadline,
    not even a name lookup (which no socket timeout interrupts). At the deadline the watchdog
    shuts the exchange's sockets down and the caller answers `provider_unavailable`.
    Never raises for network trouble.
    """
    base_url = base_url_for(provider)
    if base_url is None:
        return Reason.NO_VERIFIER
    try:
        headers = _headers(check, fields)
        url = base_url.rstrip("/") + _path(check, fields)
    except _Unsendable:
        # No provider accepts a credential that cannot be sent; nothing is sent.
        logger.info("verification of %s: value not sendable in a header", provider.id)
        return Reason.REJECTED
    started = time.monotonic()
    watchdog = _Watchdog(timeout)
    outcome: list[tuple[Reason, str]] = []
    worker = threading.Thread(
        target=lambda: outcome.append(_exchange(check, url, headers, timeout, watchdog)),
        name=f"credvault-verify-{provider.id}",
        daemon=True,
    )
    watchdog.start()
    worker.start()
    worker.join(timeout + UNWIND_SECONDS)
    if outcome and not watchdog.fired:
        reason, status = outcome[0]
    else:
        reason, status = Reason.PROVIDER_UNAVAILABLE, "timeout"
    logger.info(
        "verification of %s: %s (%s) in %.0f ms",
        provider.id,
        reason.value,
        status,
        (time.monotonic() - started) * 1000,
    )
    return reason


def verify(provider_id: str, fields: Mapping[str, Revealable]) -> Verdict:
    """Verify a credential set whose keyNames match one of the provider's shapes.

    A service outside the catalog, or a shape without a check, is `no_verifier`: no request.
    """
    provider = catalog.get(provider_id)
    if provider is None:
        return Verdict(Reason.NO_VERIFIER)
    shape = provider.match(fields).shape
    if shape is None or not can_verify(provider, shape):
        return Verdict(Reason.NO_VERIFIER)
    timeout = float(settings.CREDVAULT_VERIFY_TIMEOUT)
    return Verdict(run_check(provider, shape.check, fields, timeout))
