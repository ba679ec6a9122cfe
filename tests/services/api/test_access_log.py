"""What every response carries and what every request logs: Cache-Control no-store,
JSON whatever the Accept header, a safe request id, and one access-log line without secrets."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.test import Client

from tests.support.helpers import creds


@pytest.mark.django_db
class TestEveryResponse:
    def test_cache_control_no_store_everywhere(self, alice_api, anonymous_api):
        responses = [
            alice_api.list(),
            alice_api.store("custom", creds(api_key="v")),
            alice_api.test("custom", creds(api_key="v")),
            alice_api.delete("custom"),
            alice_api.delete("custom"),
            anonymous_api.list(),
            Client().get("/nowhere"),
            Client().get("/healthz"),
            Client().get("/readyz"),
            Client().get("/api/v1/schema"),
            Client().get("/api/docs"),
            Client().get("/admin/login/"),
        ]
        for response in responses:
            assert response["Cache-Control"] == "no-store", response

    def test_one_access_line_per_request_without_secrets(self, alice_api, caplog):
        caplog.set_level(logging.INFO, logger="credvault.access")
        response = alice_api.raw(
            "PUT",
            "/api/v1/services/credentials?debug=MARKED-query",
            json.dumps({"service": "custom", "credentials": creds(api_key="MARKED-body")}),
            X_Request_ID="req-123",
        )
        assert response.status_code == 201
        lines = [r.getMessage() for r in caplog.records if r.name == "credvault.access"]
        assert len(lines) == 1
        line = lines[0]
        assert line.startswith("PUT /api/v1/services/credentials 201 ")
        assert re.search(r" \d+\.\dms ", line)
        assert f"token={alice_api.token[:12]} " in line
        assert line.endswith("request_id=req-123")
        assert "MARKED" not in line
        assert alice_api.token not in line
        assert response["X-Request-ID"] == "req-123"

    def test_a_refused_token_is_not_logged(self, db, caplog):
        caplog.set_level(logging.INFO)
        bad = "cvt_" + "A" * 46
        Client().get("/api/v1/services", headers={"Authorization": f"Bearer {bad}"})
        assert bad not in caplog.text
        assert bad[:12] not in caplog.text
        assert "token=-" in caplog.text

    def test_an_unsafe_request_id_is_replaced(self, db):
        response = Client().get("/healthz", headers={"X-Request-ID": "bad id\nforged"})
        assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])

    def test_path_control_characters_are_escaped_in_the_log(self, db, caplog):
        caplog.set_level(logging.INFO, logger="credvault.access")
        Client().get("/nowhere%0Aforged 200")
        [record] = [r for r in caplog.records if r.name == "credvault.access"]
        assert "\n" not in record.getMessage()

    def test_accept_header_never_turns_json_into_406(self, alice_api):
        response = alice_api.client.get(
            "/api/v1/services", headers=alice_api.headers({"Accept": "text/html"})
        )
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"


@pytest.mark.django_db
def test_a_connects_start_id_is_not_logged(caplog):
    """The id of a start page lets whoever holds it continue the connect: the access log
    withholds it."""
    with caplog.at_level("INFO", logger="credvault.access"):
        Client(raise_request_exception=False).get("/oauth/start/s3cr3t-start-id")
    [line] = [r.getMessage() for r in caplog.records if r.name == "credvault.access"]
    assert line.startswith("GET /oauth/start/... 400 ")
    assert "s3cr3t-start-id" not in caplog.text
