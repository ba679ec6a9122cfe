"""Per-token rate limits on the configured cache.

Fixed windows counted with the cache's atomic `add` and `incr`, so that the count is shared by
every worker and host using the same cache (Redis); with the default local-memory cache each
worker counts alone. Each throttle reads its rate setting, typed as it loaded
(services/rates.py).
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

from services.rates import Rate


class TokenRateThrottle(BaseThrottle):
    """Counts the requests of one token in the current window of the rate."""

    scope = "api"

    def __init__(self) -> None:
        self._wait = 0.0

    def rate(self) -> Rate:
        return settings.CREDVAULT_RATE_LIMIT

    def allow_request(self, request, view) -> bool:
        principal = request.user
        if principal is None:
            return True
        limit, period = self.rate()
        now = time.time()
        window = int(now // period)
        # The display prefix: unique across both kinds of token, whose ids are not.
        key = f"credvault:rl:{self.scope}:{principal.token_prefix}:{period}:{window}"
        try:
            count = cache.incr(key)
        except ValueError:
            # The first request of the window (one cache operation for all the others).
            count = 1 if cache.add(key, 1, timeout=period + 1) else cache.incr(key)
        if count <= limit:
            return True
        self._wait = (window + 1) * period - now
        return False

    def wait(self) -> float:
        return max(1.0, math.ceil(self._wait))


class TestRateThrottle(TokenRateThrottle):
    """The tighter limit of every request that calls a provider: the test operation, and a
    store with `?verify=required`. A view says which through `calls_provider(request)`."""

    __test__ = False  # not a pytest test class
    scope = "test"

    def rate(self) -> Rate:
        return settings.CREDVAULT_TEST_RATE_LIMIT

    def allow_request(self, request, view) -> bool:
        calls_provider = getattr(view, "calls_provider", None)
        if calls_provider is not None and not calls_provider(request):
            return True
        return super().allow_request(request, view)


class ProxyRateThrottle(TokenRateThrottle):
    """Brokered calls, per agent token."""

    scope = "proxy"

    def rate(self) -> Rate:
        return settings.CREDVAULT_PROXY_RATE_LIMIT
