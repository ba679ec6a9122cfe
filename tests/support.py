"""Test helpers: an account-API client, marked secrets, and (from scripts/stand_ins.py) a real
HTTP server on 127.0.0.1 that plays a provider: the test sees each request exactly as the
provider would."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from django.db import connection
from django.test import Client

from scripts.stand_ins import ProviderServer  # noqa: F401 - the tests' provider

PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def marked(label: str = "value") -> str:
    """A secret that is easy to search for in any output."""
    return f"MARKED-SECRET-{label}-{secrets.token_hex(8)}"


def creds(**values: str) -> list[dict[str, str]]:
    return [{"keyName": name, "value": value} for name, value in values.items()]


class Api:
    """The account API with one token."""

    def __init__(self, client: Client, token: str | None) -> None:
        self.client = client
        self.token = token

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        headers.update(extra or {})
        return headers

    def list(self):
        return self.client.get("/api/v1/services", headers=self.headers())

    def raw(self, method: str, path: str, body: bytes | str = b"", **kwargs: Any):
        content_type = kwargs.pop("content_type", "application/json")
        # The test client leaves out Content-Type for an empty body; a real client does not.
        return self.client.generic(
            method,
            path,
            body,
            content_type=content_type,
            headers=self.headers(kwargs),
            CONTENT_TYPE=content_type,
        )

    def store(self, service: str, credentials: list[dict[str, str]]):
        body = json.dumps({"service": service, "credentials": credentials})
        return self.raw("PUT", "/api/v1/services/credentials", body)

    def test(self, service: str, credentials: list[dict[str, str]]):
        body = json.dumps({"service": service, "credentials": credentials})
        return self.raw("POST", "/api/v1/services/test", body)

    def delete(self, service: str):
        return self.client.delete(f"/api/v1/services/credentials/{service}", headers=self.headers())


def assert_problem(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response["Cache-Control"] == "no-store"
    body = json.loads(response.content)
    assert set(body) >= PROBLEM_KEYS
    extensions = {"errors"} | ({"reason"} if code == "verification_failed" else set())
    assert set(body) - PROBLEM_KEYS <= extensions
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["code"] == code
    assert body["title"]
    assert body["detail"]
    assert b"Traceback" not in response.content
    return body


def elapsed(start: float) -> float:
    return time.monotonic() - start


def audit_record_queries() -> int:
    """The audit event of a request that changes nothing: one statement on both databases
    (lock the head, hash, insert, move the head: on SQLite a trigger moves the head)."""
    return 1


def replace_fields_queries() -> int:
    """A replacing store moves the service's row to its next generation, deletes the fields
    whose keyName is not in the new set and writes over or inserts the others: one statement
    on PostgreSQL (writes in a WITH clause), three on SQLite."""
    return 1 if connection.vendor == "postgresql" else 3


def audit_change_queries() -> int:
    """The audit of a change: lock the head first (PostgreSQL: SELECT ... FOR UPDATE; SQLite:
    no statement, the IMMEDIATE transaction holds the lock), then append the event (one
    statement)."""
    return 2 if connection.vendor == "postgresql" else 1
