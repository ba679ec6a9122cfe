"""Operations (CONTRACT 2, 9): health and readiness, schema and docs, Cache-Control, the
access log, request ids, and the system checks that stop a misconfigured start."""

from __future__ import annotations

import json
import logging
import re
import secrets

import pytest
from django.db import OperationalError
from django.test import Client

from tests.conftest import KEY_B
from tests.support import assert_problem, creds
from tests.test_commands import manage


class TestHealth:
    def test_healthz_needs_neither_token_nor_database(self):
        # No django_db mark: any database access would raise here.
        response = Client().get("/healthz")
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}

    @pytest.mark.django_db
    def test_readyz_is_200_when_database_and_keys_are_there(self, alice_api):
        alice_api.store("custom", creds(api_key="v"))
        response = Client().get("/readyz")
        assert response.status_code == 200
        assert response.json() == {"status": "ready"}

    @pytest.mark.django_db
    def test_readyz_is_503_when_a_key_in_use_is_missing(self, alice_api, settings):
        alice_api.store("custom", creds(api_key="v"))
        settings.CREDVAULT_ENCRYPTION_KEYS = f"other:{KEY_B}"
        assert_problem(Client().get("/readyz"), 503, "service_unavailable")

    @pytest.mark.django_db
    def test_readyz_is_503_when_the_database_is_unreachable(self, monkeypatch):
        from django.db.backends import utils

        def refused(*args, **kwargs):
            raise OperationalError("connection refused")

        monkeypatch.setattr(utils.CursorWrapper, "execute", refused)
        assert_problem(Client().get("/readyz"), 503, "service_unavailable")


@pytest.mark.django_db
class TestSchemaAndDocs:
    def schema(self) -> dict:
        response = Client().get("/api/v1/schema?format=json")
        assert response.status_code == 200
        return json.loads(response.content)

    def test_schema_describes_every_operation(self):
        doc = self.schema()
        assert doc["openapi"].startswith("3.")
        operations = {
            (path, method)
            for path, item in doc["paths"].items()
            for method in item
            if method in {"get", "put", "post", "delete"}
        }
        assert operations == {
            ("/api/v1/agents", "get"),
            ("/api/v1/agents/{name}", "put"),
            ("/api/v1/agents/{name}", "delete"),
            ("/api/v1/agents/{name}/tokens", "post"),
            ("/api/v1/agent/credentials/{service}", "get"),
            ("/api/v1/audit-events", "get"),
            ("/api/v1/providers", "get"),
            ("/api/v1/services", "get"),
            ("/api/v1/services/test", "post"),
            ("/api/v1/services/credentials", "put"),
            ("/api/v1/services/credentials/{service}", "delete"),
        }
        for name in ("accountToken", "agentToken"):
            scheme = doc["components"]["securitySchemes"][name]
            assert scheme == scheme | {"type": "http", "scheme": "bearer"}
        for path, item in doc["paths"].items():
            for method in ("put", "post"):
                if method in item and not path.endswith("/tokens"):
                    body = item[method]["requestBody"]
                    assert body["required"] is True, (path, method)
                    assert list(body["content"]) == ["application/json"], (path, method)
                    assert body["content"]["application/json"]["examples"], (path, method)
        tokens_body = doc["paths"]["/api/v1/agents/{name}/tokens"]["post"]["requestBody"]
        assert tokens_body.get("required", False) is False
        agent_read = doc["paths"]["/api/v1/agent/credentials/{service}"]["get"]
        assert agent_read["security"] == [{"agentToken": []}]

    def test_schema_lists_the_status_codes_the_server_answers(self):
        paths = self.schema()["paths"]
        expected = {
            ("/api/v1/services", "get"): {"200", "401", "405", "429", "503"},
            ("/api/v1/services/test", "post"): {"200", "400", "401", "413", "415", "429"},
            ("/api/v1/services/credentials", "put"): {
                "200",
                "201",
                "400",
                "401",
                "409",
                "413",
                "415",
            },
            ("/api/v1/services/credentials/{service}", "delete"): {"204", "400", "401", "404"},
        }
        for (path, method), codes in expected.items():
            responses = paths[path][method]["responses"]
            assert codes <= set(responses), (path, method)
            for code in codes - {"200", "201", "204"}:
                assert "application/problem+json" in responses[code]["content"]
        assert "Retry-After" in paths["/api/v1/services"]["get"]["responses"]["429"]["headers"]
        for path, item in paths.items():  # any token of the wrong kind: 403 insufficient_scope
            for method, operation in item.items():
                if method in {"get", "put", "post", "delete"}:
                    assert "403" in operation["responses"], (path, method)
        store = paths["/api/v1/services/credentials"]["put"]
        [verify] = [p for p in store["parameters"] if p["name"] == "verify"]
        assert verify["in"] == "query"
        assert verify["schema"]["enum"] == ["required"]

    def test_schema_validates_without_warnings(self, tmp_path):
        from django.core.management import call_command

        target = tmp_path / "schema.yaml"
        call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
        assert "operationId: store_credentials" in target.read_text()

    def test_docs_are_served_from_local_assets(self):
        response = Client().get("/api/docs")
        assert response.status_code == 200
        html = response.content.decode()
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets
        assert not re.search(r"https?://", " ".join(assets)), assets
        assert "cdn" not in html.lower()
        for asset in assets:
            assert asset.startswith("/static/"), asset
            assert Client().get(asset).status_code == 200, asset


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


class TestSystemChecks:
    """A misconfigured start stops at `manage.py check` with a clear message."""

    def test_an_sqlite_without_returning_fails_check(self, monkeypatch):
        from django.db import connection

        from services import checks

        if connection.vendor != "sqlite":
            pytest.skip("a check of the SQLite library")
        assert checks.check_sqlite_version(None) == []
        monkeypatch.setattr(checks.sqlite3, "sqlite_version_info", (3, 34, 1))
        [error] = checks.check_sqlite_version(None)
        assert error.id == "credvault.E007"
        assert "3.35" in error.msg

    @pytest.mark.parametrize(
        ("env", "check_id", "words"),
        [
            ({"SECRET_KEY": ""}, "credvault.E001", "SECRET_KEY is not set"),
            ({"CREDVAULT_ENCRYPTION_KEYS": ""}, "credvault.E002", "not set"),
            ({"CREDVAULT_ENCRYPTION_KEYS": "k1:bm90LWJhc2U2NA"}, "credvault.E002", "base64"),
            ({"CREDVAULT_ENCRYPTION_KEYS": "k1:c2hvcnQ="}, "credvault.E002", "32"),
            (
                {"CREDVAULT_ENCRYPTION_KEYS": f"k1:{KEY_B},k1:{KEY_B}"},
                "credvault.E002",
                "duplicate",
            ),
            ({"CREDVAULT_PROVIDER_BASE_URLS": "[1"}, "credvault.E003", "JSON"),
            (
                {"CREDVAULT_PROVIDER_BASE_URLS": '{"github": "ftp://x"}'},
                "credvault.E003",
                "http(s) URL",
            ),
            ({"CREDVAULT_RATE_LIMIT": "lots"}, "credvault.E004", "rate"),
        ],
    )
    def test_bad_configuration_fails_check(self, env, check_id, words):
        result = manage("check", **env)
        assert result.returncode != 0
        assert check_id in result.stderr
        assert words in result.stderr
        assert KEY_B not in result.stderr

    def test_deploy_check_passes_in_a_production_configuration(self):
        result = manage(
            "check",
            "--deploy",
            "--fail-level",
            "WARNING",
            SECRET_KEY=secrets.token_urlsafe(50),
            DEBUG="false",
            SECURE_SSL_REDIRECT="true",
            ALLOWED_HOSTS="vault.example.com",
        )
        assert result.returncode == 0, result.stderr

    def test_environment_provider_base_urls_are_read(self):
        result = manage(
            "shell",
            "-v",
            "0",
            "-c",
            "from providers.verification import base_url_for; from providers.catalog import get; "
            "print(base_url_for(get('github')), base_url_for(get('gitlab')))",
            CREDVAULT_PROVIDER_BASE_URLS='{"github": "https://ghe.example.com/api/v3"}',
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["https://ghe.example.com/api/v3", "https://gitlab.com"]
