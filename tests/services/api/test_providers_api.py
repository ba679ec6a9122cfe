"""`GET /api/v1/providers` and verify-on-store (`PUT ...?verify=required`)."""

from __future__ import annotations

import json

import pytest

from providers.catalog import catalog
from services.models import ConnectedService, CredentialField
from services.rates import parse_rate
from tests.support.helpers import assert_problem, audit_record_queries, creds, marked

pytestmark = pytest.mark.django_db

STORE = "/api/v1/services/credentials"


class TestProviderList:
    def test_needs_a_token(self, anonymous_api):
        assert_problem(anonymous_api.client.get("/api/v1/providers"), 401, "not_authenticated")

    def test_lists_every_provider_with_its_shapes(self, alice_api, django_assert_num_queries):
        with django_assert_num_queries(1 + audit_record_queries()):
            # 1. SELECT the token by digest, joined to its account; then the audit event
            response = alice_api.client.get("/api/v1/providers", headers=alice_api.headers())
        assert response.status_code == 200
        body = response.json()
        assert [entry["id"] for entry in body] == sorted(catalog())
        github = next(entry for entry in body if entry["id"] == "github")
        assert github == {
            "id": "github",
            "name": "GitHub",
            "category": "developer",
            "shapes": [
                {"keyType": "api_key", "required": ["api_key"], "optional": [], "verifiable": True},
                {
                    "keyType": "oauth",
                    "required": ["access_token"],
                    "optional": [
                        "client_id",
                        "client_secret",
                        "expires_at",
                        "id_token",
                        "refresh_token",
                        "scope",
                        "token_type",
                    ],
                    "verifiable": True,
                },
            ],
        }
        twilio = next(entry for entry in body if entry["id"] == "twilio")
        assert twilio["shapes"][0]["required"] == ["account_sid", "auth_token"]

    def test_a_per_customer_host_is_verifiable_only_once_configured(self, alice_api, settings):
        def shopify() -> dict:
            response = alice_api.client.get("/api/v1/providers", headers=alice_api.headers())
            return next(entry for entry in response.json() if entry["id"] == "shopify")

        assert shopify()["shapes"][0]["verifiable"] is False
        settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"shopify": "https://shop.example"})
        assert shopify()["shapes"][0]["verifiable"] is True

    def test_zendesk_api_tokens_are_stored_unverified(self, alice_api):
        response = alice_api.client.get("/api/v1/providers", headers=alice_api.headers())
        zendesk = next(entry for entry in response.json() if entry["id"] == "zendesk")
        api_token = next(s for s in zendesk["shapes"] if s["keyType"] == "api_key")
        assert api_token == {
            "keyType": "api_key",
            "required": ["api_token", "email"],
            "optional": [],
            "verifiable": False,
        }


def _put(api, service: str, verify: str | None = "required", **values: str):
    path = STORE if verify is None else f"{STORE}?verify={verify}"
    body = json.dumps({"service": service, "credentials": creds(**values)})
    return api.raw("PUT", path, body)


class TestVerifyOnStore:
    def test_an_accepted_set_is_stored(self, alice_api, provider_server, alice):
        provider_server.answer(200, {"login": "octocat"})
        response = _put(alice_api, "github", api_key="ghp_good")
        assert response.status_code == 201
        assert response.json()["service"] == "github"
        assert len(provider_server.requests) == 1
        assert ConnectedService.objects.filter(account=alice, service="github").exists()

    def test_an_accepted_replacement_is_200(self, alice_api, provider_server):
        provider_server.answer(200, {})
        assert _put(alice_api, "github", api_key="one").status_code == 201
        assert _put(alice_api, "github", api_key="two").status_code == 200

    @pytest.mark.parametrize(
        ("status", "body", "reason"),
        [
            (401, {"message": "Bad credentials"}, "rejected"),
            (403, {}, "rejected"),
            (500, {}, "provider_unavailable"),
            (429, {}, "provider_unavailable"),
        ],
    )
    def test_anything_else_is_422_and_the_earlier_set_stays(
        self, alice_api, provider_server, status, body, reason
    ):
        provider_server.answer(200, {})
        assert _put(alice_api, "github", api_key="earlier").status_code == 201
        before = list(CredentialField.objects.values_list("pk", "ciphertext"))
        provider_server.answer(status, body)
        secret = marked()
        response = _put(alice_api, "github", api_key=secret)
        problem = assert_problem(response, 422, "verification_failed")
        assert problem["reason"] == reason
        assert secret not in response.content.decode()
        assert list(CredentialField.objects.values_list("pk", "ciphertext")) == before
        assert ConnectedService.objects.get().generation == 1

    def test_slack_ok_false_is_refused(self, alice_api, provider_server):
        provider_server.answer(200, {"ok": False, "error": "invalid_auth"})
        problem = assert_problem(
            _put(alice_api, "slack", api_key="xoxb-bad"), 422, "verification_failed"
        )
        assert problem["reason"] == "rejected"
        assert not ConnectedService.objects.exists()

    def test_a_service_without_a_check_cannot_be_proven(self, alice_api, provider_server):
        problem = assert_problem(
            _put(alice_api, "my-own-api", api_key="k"), 422, "verification_failed"
        )
        assert problem["reason"] == "no_verifier"
        assert provider_server.requests == []
        assert not ConnectedService.objects.exists()

    @pytest.mark.parametrize("value", ["", "yes", "true", "REQUIRED"])
    def test_any_other_verify_value_is_400(self, alice_api, provider_server, value):
        problem = assert_problem(
            _put(alice_api, "github", verify=value, api_key="k"), 400, "invalid_request"
        )
        assert problem["errors"][0]["field"] == "verify"
        assert provider_server.requests == []
        assert not ConnectedService.objects.exists()

    def test_a_bad_body_asks_no_provider(self, alice_api, provider_server):
        response = alice_api.raw("PUT", f"{STORE}?verify=required", b'{"service": "github"}')
        assert_problem(response, 400, "invalid_request")
        assert provider_server.requests == []

    def test_a_store_without_verify_asks_no_provider(self, alice_api, provider_server):
        assert _put(alice_api, "github", verify=None, api_key="k").status_code == 201
        assert provider_server.requests == []

    def test_verified_stores_count_against_the_test_limit(
        self, alice_api, provider_server, settings
    ):
        settings.CREDVAULT_TEST_RATE_LIMIT = parse_rate("2/min")
        provider_server.answer(200, {})
        for _ in range(3):
            assert _put(alice_api, "github", verify=None, api_key="k").status_code in (200, 201)
        assert _put(alice_api, "github", api_key="k").status_code == 200
        assert _put(alice_api, "github", api_key="k").status_code == 200
        assert_problem(_put(alice_api, "github", api_key="k"), 429, "rate_limited")
        assert _put(alice_api, "github", verify=None, api_key="k").status_code == 200
