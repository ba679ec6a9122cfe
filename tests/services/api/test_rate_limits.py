"""Rate limits per token: a 429 with Retry-After, one count for every account
operation, shared between cache clients on Redis, and the test operation's tighter limit."""

from __future__ import annotations

import pytest

from services.rates import parse_rate
from tests.conftest import REDIS_PREFIX, REDIS_URL
from tests.support.helpers import assert_problem, creds


@pytest.mark.django_db
class TestRateLimits:
    def test_429_has_retry_after(self, alice_api, settings):
        settings.CREDVAULT_RATE_LIMIT = parse_rate("3/min")
        for _ in range(3):
            assert alice_api.list().status_code == 200
        response = alice_api.list()
        assert_problem(response, 429, "rate_limited")
        assert 1 <= int(response["Retry-After"]) <= 60

    def test_429_counts_every_account_operation(self, alice_api, settings):
        settings.CREDVAULT_RATE_LIMIT = parse_rate("3/min")
        alice_api.store("a", creds(api_key="v"))
        alice_api.test("a", creds(api_key="v"))
        alice_api.delete("a")
        assert_problem(alice_api.list(), 429, "rate_limited")

    def test_rate_limit_counts_on_redis_across_clients(self, alice_api, redis_cache, settings):
        """On Redis every worker shares one count: a second cache client sees the first's."""
        settings.CREDVAULT_RATE_LIMIT = parse_rate("3/min")
        for _ in range(3):
            assert alice_api.list().status_code == 200
        prefix = f"{REDIS_PREFIX}:1:credvault:rl:api:".encode()
        [key] = [k for k in _redis_keys() if k.startswith(prefix)]
        assert _redis().get(key) == b"3"
        assert_problem(alice_api.list(), 429, "rate_limited")

    def test_the_test_operation_has_its_own_tighter_limit(self, alice_api, settings):
        settings.CREDVAULT_TEST_RATE_LIMIT = parse_rate("2/min")
        for _ in range(2):
            assert alice_api.test("custom", creds(api_key="v")).status_code == 200
        response = alice_api.test("custom", creds(api_key="v"))
        assert_problem(response, 429, "rate_limited")
        assert int(response["Retry-After"]) >= 1
        assert alice_api.list().status_code == 200


def _redis():
    import redis

    return redis.Redis.from_url(REDIS_URL)


def _redis_keys() -> list[bytes]:
    return _redis().keys(f"{REDIS_PREFIX}*")
