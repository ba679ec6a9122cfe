"""Isolation between accounts: alice and bob never see, replace or remove each other's services,
and the service limit and the rate limit count for each on its own."""

from __future__ import annotations

import json

import pytest

from services.models import ConnectedService
from services.rates import parse_rate
from tests.support.helpers import assert_problem, creds, opened_set


@pytest.mark.django_db
class TestIsolation:
    """Two accounts never see or touch each other's services."""

    def test_list_shows_only_the_own_services(self, alice_api, bob_api):
        alice_api.store("alice-only", creds(api_key="a"))
        bob_api.store("bob-only", creds(api_key="b"))
        assert [s["service"] for s in alice_api.list().json()] == ["alice-only"]
        assert [s["service"] for s in bob_api.list().json()] == ["bob-only"]

    def test_same_service_is_separate_per_account(self, alice_api, bob_api, alice, bob):
        assert alice_api.store("shared", creds(api_key="alice-value")).status_code == 201
        assert bob_api.store("shared", creds(api_key="bob-value")).status_code == 201
        assert opened_set(ConnectedService.objects.get(account=alice)) == {"api_key": "alice-value"}
        assert opened_set(ConnectedService.objects.get(account=bob)) == {"api_key": "bob-value"}

    def test_one_account_cannot_remove_the_others_service(self, alice_api, bob_api, alice):
        alice_api.store("private", creds(api_key="a"))
        assert_problem(bob_api.delete("private"), 404, "service_not_connected")
        assert ConnectedService.objects.filter(account=alice, service="private").exists()

    def test_service_limit_counts_per_account(self, alice_api, bob_api, settings):
        settings.CREDVAULT_MAX_SERVICES_PER_ACCOUNT = 1
        assert alice_api.store("one", creds(api_key="1")).status_code == 201
        assert bob_api.store("one", creds(api_key="1")).status_code == 201

    def test_rate_limit_counts_per_token(self, alice_api, bob_api, settings):
        settings.CREDVAULT_RATE_LIMIT = parse_rate("2/min")
        assert alice_api.list().status_code == 200
        assert alice_api.list().status_code == 200
        assert alice_api.list().status_code == 429
        assert bob_api.list().status_code == 200

    def test_test_operation_is_per_account_and_stores_nothing(self, alice_api, bob_api):
        bob_api.store("shared", creds(api_key="b"))
        response = alice_api.test("shared", creds(api_key="a"))
        assert json.loads(response.content)["reason"] == "no_verifier"
        assert alice_api.list().json() == []
