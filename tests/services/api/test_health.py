"""Health and readiness: `/healthz` answers without token or database, `/readyz`
is 503 when the database or a key in use is missing."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client

from services.checks import check_sealed_keys
from services.models import CredentialField
from services.sealed import CREDENTIAL_FIELDS
from tests.conftest import KEY_A, KEY_B
from tests.support.helpers import assert_problem, creds, reseal_before_data_keys


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
    def test_readyz_is_503_when_a_ring_key_that_sealed_a_value_is_missing(
        self, alice_api, settings
    ):
        settings.CREDVAULT_ENCRYPTION_KEYS = f"other:{KEY_B},test-a:{KEY_A}"
        alice_api.store("custom", creds(api_key="v"))
        # A value sealed before data keys, directly by the ring key `test-a`.
        field = CredentialField.objects.select_related("connected_service").get()
        reseal_before_data_keys(CREDENTIAL_FIELDS, field, key=KEY_A, key_id="test-a")
        assert Client().get("/readyz").status_code == 200
        settings.CREDVAULT_ENCRYPTION_KEYS = f"other:{KEY_B}"
        assert_problem(Client().get("/readyz"), 503, "service_unavailable")

    @pytest.mark.django_db
    def test_readyz_is_503_when_the_key_that_wraps_the_data_keys_is_missing(
        self, alice_api, settings
    ):
        alice_api.store("custom", creds(api_key="v"))
        assert Client().get("/readyz").status_code == 200  # the canary, wrapped by test-a
        settings.CREDVAULT_ENCRYPTION_KEYS = f"other:{KEY_B}"
        # Alice's data key and the canary's are wrapped by test-a, which the ring lacks.
        problem = assert_problem(Client().get("/readyz"), 503, "service_unavailable")
        assert problem["detail"] == "Stored values are sealed with keys missing from the key ring."
        errors = check_sealed_keys(None, databases=["default"])
        assert [error.id for error in errors] == ["credvault.E016"]
        assert errors[0].msg.startswith("2 data key value(s) are sealed with key id(s) not in")

    @pytest.mark.django_db
    def test_readyz_is_503_when_the_database_is_unreachable(self, monkeypatch):
        from django.db.backends import utils

        def refused(*args, **kwargs):
            raise OperationalError("connection refused")

        monkeypatch.setattr(utils.CursorWrapper, "execute", refused)
        assert_problem(Client().get("/readyz"), 503, "service_unavailable")


class TestProbesWhateverTheHost:
    """Probes send the pod's IP as Host; every other path keeps the host check."""

    @pytest.mark.django_db
    @pytest.mark.parametrize("path", ["/healthz", "/readyz"])
    def test_a_probe_answers_for_any_host_without_a_traceback(self, path, caplog):
        response = Client().get(path, HTTP_HOST="10.1.2.3:8000")
        assert response.status_code == 200
        assert response["Cache-Control"] == "no-store"
        assert not [record for record in caplog.records if record.exc_info]
        assert "DisallowedHost" not in caplog.text

    @pytest.mark.django_db
    def test_readyz_is_still_503_for_any_host_when_the_database_is_down(self, monkeypatch):
        from django.db.backends import utils

        def refused(*args, **kwargs):
            raise OperationalError("connection refused")

        monkeypatch.setattr(utils.CursorWrapper, "execute", refused)
        response = Client().get("/readyz", HTTP_HOST="10.1.2.3")
        assert_problem(response, 503, "service_unavailable")

    @pytest.mark.django_db
    def test_every_other_path_keeps_the_host_check(self, alice_api):
        response = Client().get(
            "/api/v1/services", HTTP_HOST="10.1.2.3", headers=alice_api.headers()
        )
        assert_problem(response, 400, "invalid_request")
