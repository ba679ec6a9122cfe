"""Server errors as problem details (CONTRACT 7): a 500 that names no cause and logs no exception
message, inside the API and outside it, and a 503 when the database cannot be reached."""

from __future__ import annotations

import json
import logging

import pytest
from django.db import OperationalError
from django.test import Client

from services import credentials
from tests.support import assert_problem, marked


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
