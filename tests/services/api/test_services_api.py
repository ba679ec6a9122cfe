"""The four operations of the account API, list, store, remove and test: status,
body and database effect."""

from __future__ import annotations

import re

import pytest

from services.models import ConnectedService, CredentialField
from tests.support.helpers import assert_problem, creds, opened_set

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.mark.django_db
class TestList:
    def test_empty_account_lists_an_empty_array(self, alice_api):
        response = alice_api.list()
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert response.json() == []

    def test_lists_exactly_four_members_sorted_by_service(self, alice_api):
        """The seed's three members, and OAuth's `status`."""
        for service in ("zeta", "alpha", "Mid Service"):
            assert alice_api.store(service, creds(api_key="v")).status_code == 201
        body = alice_api.list().json()
        assert [entry["service"] for entry in body] == ["alpha", "mid-service", "zeta"]
        for entry in body:
            assert set(entry) == {"service", "connectedAt", "keyType", "status"}
            assert RFC3339_UTC.fullmatch(entry["connectedAt"])
            assert entry["keyType"] == "api_key"
            assert entry["status"] == "connected"


@pytest.mark.django_db
@pytest.mark.usefixtures("each_key_manager")
class TestStore:
    def test_new_service_is_201_with_its_state(self, alice_api, alice):
        response = alice_api.store(" GitHub ", creds(api_key="ghp_value"))
        assert response.status_code == 201
        body = response.json()
        assert set(body) == {"service", "connectedAt", "keyType"}
        assert body["service"] == "github"
        assert body["keyType"] == "api_key"
        assert RFC3339_UTC.fullmatch(body["connectedAt"])
        service = ConnectedService.objects.get(account=alice, service="github")
        assert opened_set(service) == {"api_key": "ghp_value"}
        assert service.generation == 1

    def test_store_replaces_every_field(self, alice_api, alice):
        alice_api.store("custom", creds(client_id="a", client_secret="b", region="eu"))
        response = alice_api.store("custom", creds(api_key="only"))
        assert response.status_code == 200
        service = ConnectedService.objects.get(account=alice, service="custom")
        assert opened_set(service) == {"api_key": "only"}
        assert service.generation == 2
        assert CredentialField.objects.filter(connected_service=service).count() == 1

    def test_a_replacement_keeps_the_rows_of_the_keynames_that_stay(self, alice_api, alice):
        """Fields whose keyName stays are written over in place (no new row, no new index
        entry); the others are deleted or inserted."""
        alice_api.store("custom", creds(a="1", b="2", c="3"))
        service = ConnectedService.objects.get(account=alice, service="custom")
        kept = dict(service.fields.values_list("key_name", "id"))
        assert alice_api.store("custom", creds(b="new-b", c="new-c", d="new-d")).status_code == 200
        service.refresh_from_db()
        assert service.generation == 2
        assert opened_set(service) == {"b": "new-b", "c": "new-c", "d": "new-d"}
        now = dict(service.fields.values_list("key_name", "id"))
        assert now["b"] == kept["b"]
        assert now["c"] == kept["c"]
        assert now["d"] not in kept.values()

    def test_replacing_updates_connected_at(self, alice_api):
        first = alice_api.store("custom", creds(api_key="1")).json()["connectedAt"]
        second = alice_api.store("custom", creds(api_key="2")).json()["connectedAt"]
        assert second > first
        assert alice_api.list().json()[0]["connectedAt"] == second

    def test_oauth_sets_are_oauth(self, alice_api):
        response = alice_api.store(
            "custom-oauth", creds(access_token="at", refresh_token="rt", expires_at="1700000000")
        )
        assert response.json()["keyType"] == "oauth"
        response = alice_api.store("refresh-only", creds(refresh_token="rt"))
        assert response.json()["keyType"] == "oauth"

    def test_values_are_kept_byte_for_byte(self, alice_api, alice):
        pem = "-----BEGIN KEY-----\nabc\u00e9\U0001f511\n-----END KEY-----\n"
        spaced = "  padded value \t"
        alice_api.store("custom", creds(private_key=pem, api_key=spaced))
        service = ConnectedService.objects.get(account=alice, service="custom")
        assert opened_set(service) == {"private_key": pem, "api_key": spaced}

    def test_catalog_provider_requires_its_shape(self, alice_api, alice):
        response = alice_api.store("github", creds(token="x"))
        body = assert_problem(response, 400, "invalid_request")
        codes = {(error["field"], error["code"]) for error in body["errors"]}
        assert ("credentials", "missing_field") in codes
        assert ("credentials", "unexpected_field") in codes
        assert not ConnectedService.objects.filter(account=alice).exists()

    def test_service_limit_is_409_and_replacing_still_works(self, alice_api, alice, settings):
        settings.CREDVAULT_MAX_SERVICES_PER_ACCOUNT = 2
        assert alice_api.store("one", creds(api_key="1")).status_code == 201
        assert alice_api.store("two", creds(api_key="2")).status_code == 201
        assert_problem(alice_api.store("three", creds(api_key="3")), 409, "service_limit_reached")
        assert alice_api.store("two", creds(api_key="2b")).status_code == 200
        assert ConnectedService.objects.filter(account=alice).count() == 2


@pytest.mark.django_db
class TestRemove:
    def test_remove_is_204_and_deletes_every_field(self, alice_api, alice):
        alice_api.store("custom", creds(a="1", b="2"))
        response = alice_api.delete("custom")
        assert response.status_code == 204
        assert response.content == b""
        assert not ConnectedService.objects.filter(account=alice).exists()
        assert not CredentialField.objects.exists()
        assert alice_api.list().json() == []

    def test_remove_normalizes_the_path(self, alice_api):
        alice_api.store("google-drive", creds(api_key="1"))
        assert alice_api.delete("Google%20Drive").status_code == 204

    def test_removing_what_is_not_connected_is_404(self, alice_api):
        assert_problem(alice_api.delete("nothing-here"), 404, "service_not_connected")

    @pytest.mark.parametrize("path", ["..%2Fetc", "a%20b%2Fc", "", "%00", "x" * 65])
    def test_unnormalizable_path_is_400(self, alice_api, path):
        body = assert_problem(alice_api.delete(path), 400, "invalid_service")
        assert body["errors"][0]["field"] == "service"


@pytest.mark.django_db
class TestTest:
    def test_custom_service_is_no_verifier_and_stores_nothing(self, alice_api, alice):
        response = alice_api.test("my-service", creds(api_key="v"))
        assert response.status_code == 200
        assert response.json() == {"ok": True, "verified": False, "reason": "no_verifier"}
        assert not ConnectedService.objects.exists()
