"""At most CREDVAULT_PROXY_MAX_CONCURRENT brokered calls of one agent token in flight, counted
on the configured cache: shared by every worker and host with a shared cache (Redis), per
worker with the default local-memory cache, as the rate limits are. One call more is refused at
once (429 with Retry-After), so that no agent holds a worker's memory and the provider's
connections with calls it did not wait for.

The count is a cache entry per token, raised as a call starts and lowered as it ends. It lives
at most IN_FLIGHT_SECONDS, so that a worker killed in mid-call frees its place by then at the
latest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from django.conf import settings
from django.core.cache import cache

from services.exceptions import PayloadTooLarge, TooManyCallsInFlight

# The longest a count lives without a call ending: longer than any call may take.
IN_FLIGHT_SECONDS = 900
# What a refused agent is told to wait: a call in flight usually ends within it.
RETRY_AFTER_SECONDS = 1


def max_body() -> int:
    """The most a brokered call's body may hold (CREDVAULT_PROXY_MAX_BODY): the one declaration
    the broker, the WSGI wrapper and the proxy view read."""
    return settings.CREDVAULT_PROXY_MAX_BODY


def check_body(body: bytes) -> None:
    """PayloadTooLarge for a brokered call's body over `max_body()`: the check of the body
    itself, for the proxy route and MCP's call_api alike."""
    most = max_body()
    if len(body) > most:
        raise PayloadTooLarge.over(most)


def _key(token_prefix: str) -> str:
    return f"credvault:inflight:{token_prefix}"


def _raise(key: str) -> int:
    try:
        return cache.incr(key)
    except ValueError:
        # The first call in flight (one cache operation for all the others).
        return 1 if cache.add(key, 1, timeout=IN_FLIGHT_SECONDS) else cache.incr(key)


def _lower(key: str) -> None:
    with suppress(ValueError):  # the count expired meanwhile: nothing to lower
        cache.decr(key)


@contextmanager
def call_in_flight(*, token_prefix: str) -> Iterator[None]:
    """Count a brokered call of the token while it runs; TooManyCallsInFlight when the token
    has CREDVAULT_PROXY_MAX_CONCURRENT in flight already."""
    key = _key(token_prefix)
    if _raise(key) > settings.CREDVAULT_PROXY_MAX_CONCURRENT:
        _lower(key)
        raise TooManyCallsInFlight(RETRY_AFTER_SECONDS)
    try:
        yield
    finally:
        _lower(key)
