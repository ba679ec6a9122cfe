"""Client errors as problem details: each 4xx status with its code, a 405 with its
Allow header, on known and unknown paths alike; never HTML. Rate limits, server errors and
chunked bodies have their own modules."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.helpers import assert_problem, creds

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
