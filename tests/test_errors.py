"""Every status and problem code of CONTRACT 7 with its headers; never HTML, never a traceback."""

from __future__ import annotations

import io
import json
import logging
import warnings

import pytest
from django.db import OperationalError
from django.test import Client, RequestFactory

from services import connections, tokens
from tests.support import assert_problem, creds, marked

ENDPOINTS = {
    "/api/v1/services": "GET, HEAD",
    "/api/v1/services/test": "POST",
    "/api/v1/services/credentials": "PUT",
    "/api/v1/services/credentials/github": "DELETE",
}


@pytest.mark.django_db
class TestClientErrors:
    def test_400_malformed_json(self, alice_api):
        assert_problem(
            alice_api.raw("PUT", "/api/v1/services/credentials", b"{"), 400, "malformed_json"
        )

    def test_400_invalid_request_has_errors(self, alice_api):
        body = assert_problem(
            alice_api.raw("PUT", "/api/v1/services/credentials", b"{}"), 400, "invalid_request"
        )
        assert {"field", "code", "message"} == set(body["errors"][0])

    def test_400_invalid_service_names_the_field(self, alice_api):
        body = assert_problem(alice_api.store("a b/c", creds(api_key="v")), 400, "invalid_service")
        assert body["errors"][0]["field"] == "service"

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("GET", "/"),
            ("GET", "/api/v1"),
            ("GET", "/api/v1/"),
            ("GET", "/api/v1/services/"),
            ("POST", "/api/v2/services"),
            ("DELETE", "/api/v1/nothing"),
            ("GET", "/static/not-there.css"),
        ],
    )
    def test_404_not_found_for_unknown_paths(self, alice_api, method, path):
        response = alice_api.raw(method, path)
        assert_problem(response, 404, "not_found")

    def test_400_for_a_disallowed_host(self, db):
        response = Client(raise_request_exception=False).get(
            "/api/v1/services", headers={"Host": "evil.example"}
        )
        assert_problem(response, 400, "invalid_request")

    def test_403_for_a_failed_csrf_check_is_problem_details(self, db):
        client = Client(enforce_csrf_checks=True)
        response = client.post("/admin/login/", {"username": "x", "password": "y"})
        assert_problem(response, 403, "forbidden")

    def test_404_service_not_connected(self, alice_api):
        assert_problem(alice_api.delete("github"), 404, "service_not_connected")

    @pytest.mark.parametrize("path", list(ENDPOINTS))
    @pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
    def test_405_has_the_allow_header(self, alice_api, path, method):
        allowed = ENDPOINTS[path]
        if method in allowed:
            return
        response = alice_api.raw(method, path)
        assert_problem(response, 405, "method_not_allowed")
        assert response["Allow"] == allowed

    def test_405_comes_before_authentication(self, anonymous_api):
        response = anonymous_api.raw("PATCH", "/api/v1/services")
        assert_problem(response, 405, "method_not_allowed")
        assert response["Allow"] == "GET, HEAD"

    def test_405_on_the_health_endpoints(self, anonymous_api):
        response = anonymous_api.raw("POST", "/healthz")
        assert_problem(response, 405, "method_not_allowed")
        assert response["Allow"] == "GET, HEAD"

    def test_head_of_the_list_is_allowed(self, alice_api):
        response = alice_api.client.head("/api/v1/services", headers=alice_api.headers())
        assert response.status_code == 200

    def test_429_has_retry_after(self, alice_api, settings):
        settings.CREDVAULT_RATE_LIMIT = "3/min"
        for _ in range(3):
            assert alice_api.list().status_code == 200
        response = alice_api.list()
        assert_problem(response, 429, "rate_limited")
        assert 1 <= int(response["Retry-After"]) <= 60

    def test_429_counts_every_account_operation(self, alice_api, settings):
        settings.CREDVAULT_RATE_LIMIT = "3/min"
        alice_api.store("a", creds(api_key="v"))
        alice_api.test("a", creds(api_key="v"))
        alice_api.delete("a")
        assert_problem(alice_api.list(), 429, "rate_limited")

    def test_rate_limit_counts_on_redis_across_clients(self, alice_api, redis_cache, settings):
        """On Redis every worker shares one count: a second cache client sees the first's."""
        settings.CREDVAULT_RATE_LIMIT = "3/min"
        for _ in range(3):
            assert alice_api.list().status_code == 200
        [key] = [k for k in _redis_keys() if k.startswith(b":1:credvault:rl:api:")]
        assert _redis().get(key) == b"3"
        assert_problem(alice_api.list(), 429, "rate_limited")

    def test_the_test_operation_has_its_own_tighter_limit(self, alice_api, settings):
        settings.CREDVAULT_TEST_RATE_LIMIT = "2/min"
        for _ in range(2):
            assert alice_api.test("custom", creds(api_key="v")).status_code == 200
        response = alice_api.test("custom", creds(api_key="v"))
        assert_problem(response, 429, "rate_limited")
        assert int(response["Retry-After"]) >= 1
        assert alice_api.list().status_code == 200

    def test_the_default_cache_takes_any_key_without_a_warning(self):
        """credvault/cache.py: the local-memory cache skips memcached's key checks."""
        from django.core.cache import cache

        from credvault.cache import LocMemCache

        assert isinstance(cache._connections["default"], LocMemCache)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.set("a key with spaces\x01" + "x" * 300, 1)

    def test_the_rate_limit_keys_pass_memcacheds_checks(self, alice_api, settings):
        """So that skipping the checks (credvault/cache.py) hides nothing on another backend."""
        from django.core.cache import cache
        from django.core.cache.backends.base import memcache_key_warnings

        settings.CREDVAULT_TEST_RATE_LIMIT = "5/min"
        assert alice_api.test("custom", creds(api_key="v")).status_code == 200
        prefix = tokens.display_prefix(alice_api.token)
        keys = [key for key in cache._connections["default"]._cache if f":{prefix}:" in key]
        assert len(keys) == 2  # the account's limit and the test operation's
        for key in keys:
            assert list(memcache_key_warnings(key)) == []


def _redis():
    import redis

    return redis.Redis.from_url("redis://127.0.0.1:6379/15")


def _redis_keys() -> list[bytes]:
    return _redis().keys("*")


@pytest.mark.django_db
class TestServerErrors:
    def test_500_is_generic_and_logs_no_message(self, alice_api, monkeypatch, caplog):
        secret = marked("exception")

        def broken(**kwargs):
            raise RuntimeError(secret)

        monkeypatch.setattr(connections, "list_services", broken)
        with caplog.at_level(logging.DEBUG):
            response = alice_api.list()
        body = assert_problem(response, 500, "internal_error")
        assert secret not in json.dumps(body)
        formatted = [h.format(r) for h in logging.getLogger().handlers for r in caplog.records]
        assert any("RuntimeError" in line for line in formatted)
        assert not any(secret in line for line in formatted)

    def test_500_outside_the_api_is_problem_details(self, monkeypatch, db):
        from services.api import health

        def broken(*args, **kwargs):
            raise RuntimeError("boom")

        monkeypatch.setattr(health, "JsonResponse", broken)
        response = Client(raise_request_exception=False).get("/healthz")
        assert_problem(response, 500, "internal_error")

    def test_503_when_the_database_cannot_be_reached(self, alice_api, monkeypatch):
        from django.db.backends import utils

        def refused(*args, **kwargs):
            raise OperationalError("connection refused")

        monkeypatch.setattr(utils.CursorWrapper, "execute", refused)
        response = alice_api.list()
        assert_problem(response, 503, "service_unavailable")


@pytest.mark.django_db(transaction=True)
class TestChunkedBodies:
    """A body without Content-Length is read whole (gunicorn marks its end), never as empty."""

    def _environ(self, token: str, raw: bytes, *, terminated: bool = True) -> dict:
        request = RequestFactory().put(
            "/api/v1/services/credentials",
            raw,
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        environ = dict(request.environ)
        environ.pop("CONTENT_LENGTH")
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        environ["wsgi.input"] = io.BytesIO(raw)
        environ["wsgi.input_terminated"] = terminated
        return environ

    def _call(self, environ: dict) -> tuple[str, bytes]:
        from credvault.wsgi import application

        status = []
        chunks = application(environ, lambda s, h, exc_info=None: status.append(s))
        return status[0], b"".join(chunks)

    def test_chunked_body_is_stored(self, alice_account_and_token):
        _, token = alice_account_and_token
        raw = json.dumps({"service": "chunked", "credentials": creds(api_key="v")}).encode()
        status, body = self._call(self._environ(token, raw))
        assert status.startswith("201"), body

    def test_chunked_body_over_the_limit_is_413(self, alice_account_and_token):
        _, token = alice_account_and_token
        status, body = self._call(self._environ(token, b"x" * (70 * 1024)))
        assert status.startswith("413")
        assert json.loads(body)["code"] == "payload_too_large"

    def test_unterminated_input_is_411(self, alice_account_and_token):
        _, token = alice_account_and_token
        status, body = self._call(self._environ(token, b"{}", terminated=False))
        assert status.startswith("411")
        assert json.loads(body)["code"] == "length_required"
