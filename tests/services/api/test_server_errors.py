"""Server errors as problem details: a 500 that names no cause and logs no exception
message, inside the API and outside it, and a 503 when the database cannot be reached."""

from __future__ import annotations

import json
import logging

import pytest
from django.db import OperationalError
from django.test import Client

from services import credentials
from tests.support.helpers import agent_token, assert_problem, creds, marked, put_agent, read


@pytest.mark.django_db
class TestServerErrors:
    def test_500_is_generic_and_logs_no_message(self, alice_api, monkeypatch, caplog):
        secret = marked("exception")

        def broken(**kwargs):
            raise RuntimeError(secret)

        monkeypatch.setattr(credentials, "list_services", broken)
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


@pytest.mark.django_db
def test_a_moved_ciphertext_is_a_500_whose_log_names_the_row(alice_api, caplog):
    """A value that does not open: the error names the row (table, id, key id, account,
    service, keyName) in the log, never a byte of the value; the answer names nothing."""
    from services.models import CredentialField

    secret, other = marked("moved"), marked("target")
    alice_api.store("source", creds(api_key=secret))
    alice_api.store("target", creds(api_key=other))
    put_agent(alice_api, "bot", ["target"])
    token = agent_token(alice_api, "bot")
    source = CredentialField.objects.get(connected_service__service="source")
    target = CredentialField.objects.get(connected_service__service="target")
    CredentialField.objects.filter(pk=target.pk).update(ciphertext=source.ciphertext)
    with caplog.at_level(logging.ERROR):
        response = read(token, "target")
    body = assert_problem(response, 500, "internal_error")
    assert secret not in response.content.decode()
    assert "target" not in body["detail"]
    formatted = "\n".join(
        h.format(r) for h in logging.getLogger().handlers for r in caplog.records if r.exc_info
    )
    account = target.connected_service.account_id
    assert (
        f"services.crypto.DecryptionError: services_credentialfield id {target.pk} "
        f"(key id '{target.key_id}', account {account}, service 'target', keyName 'api_key') "
        "failed authentication"
    ) in formatted
    assert secret not in formatted
    assert other not in formatted
