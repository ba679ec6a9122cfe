"""Store is atomic: a failure anywhere leaves the earlier set untouched, and
concurrent stores of one service leave exactly one submitted set, never a mix."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from django.db import connection
from django.test import Client

from services import sealed
from services.models import ConnectedService, CredentialField
from services.storage import queries
from tests.support.helpers import Api, assert_problem, creds, opened_set


def snapshot() -> tuple[list, list]:
    services = list(ConnectedService.objects.values_list("service", "generation", "connected_at"))
    fields = list(
        CredentialField.objects.order_by("pk").values_list("pk", "key_name", "ciphertext")
    )
    return services, [(pk, name, bytes(blob)) for pk, name, blob in fields]


@pytest.mark.django_db
class TestFaults:
    @pytest.fixture
    def earlier(self, alice_api):
        assert alice_api.store("custom", creds(a="1", b="2", c="3")).status_code == 201
        return snapshot()

    def _fail_on_seal(self, monkeypatch, call_number: int) -> None:
        real = sealed.seal_value
        calls = {"n": 0}

        def seal(cipher, key_id, value, place):
            calls["n"] += 1
            if calls["n"] == call_number:
                raise RuntimeError("injected fault")
            return real(cipher, key_id, value, place)

        monkeypatch.setattr(sealed, "seal_value", seal)

    def test_fault_after_the_service_row_is_locked(self, alice_api, earlier, monkeypatch):
        # The first seal of a replacement runs once the service's row is locked and read.
        self._fail_on_seal(monkeypatch, 1)
        response = alice_api.store("custom", creds(x="new1", y="new2", z="new3"))
        assert_problem(response, 500, "internal_error")
        assert snapshot() == earlier

    def test_fault_after_one_of_three_values_is_sealed(self, alice_api, earlier, monkeypatch):
        self._fail_on_seal(monkeypatch, 2)
        response = alice_api.store("custom", creds(x="new1", y="new2", z="new3"))
        assert_problem(response, 500, "internal_error")
        assert snapshot() == earlier
        assert opened_set(ConnectedService.objects.get()) == {"a": "1", "b": "2", "c": "3"}

    def test_fault_while_writing_the_new_fields(self, alice_api, earlier, monkeypatch):
        real = queries.replace_fields

        def replace_then_fail(*args, **kwargs):
            real(*args, **kwargs)  # the new set is written, then the transaction fails
            raise RuntimeError("injected fault")

        monkeypatch.setattr(queries, "replace_fields", replace_then_fail)
        assert_problem(alice_api.store("custom", creds(x="1")), 500, "internal_error")
        assert snapshot() == earlier

    def test_fault_while_connecting_a_new_service_leaves_nothing(self, alice_api, monkeypatch):
        self._fail_on_seal(monkeypatch, 2)
        assert_problem(alice_api.store("fresh", creds(x="1", y="2")), 500, "internal_error")
        assert not ConnectedService.objects.filter(service="fresh").exists()
        assert alice_api.list().json() == []


def _race(token: str, service: str, sets: list[dict[str, str]]) -> list[int]:
    """Store every set from its own thread, all released at once by a barrier."""
    barrier = threading.Barrier(len(sets))
    statuses: list[int] = [0] * len(sets)

    def store(index: int) -> None:
        try:
            api = Api(Client(raise_request_exception=False), token)
            body = json.dumps({"service": service, "credentials": creds(**sets[index])})
            barrier.wait(timeout=10)
            statuses[index] = api.raw("PUT", "/api/v1/services/credentials", body).status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=store, args=(i,)) for i in range(len(sets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_number", range(3))
def test_concurrent_stores_leave_exactly_one_set(alice_account_and_token, round_number):
    """Eight stores of one new service race: one 201, seven 200, and the stored set is one
    submitted set whole (each set's fields carry its own marker and keyNames)."""
    _, token = alice_account_and_token
    sets = [
        {"api_key": f"set{i}-a", "shared": f"set{i}-b", f"only_{i}": f"set{i}-c"} for i in range(8)
    ]
    statuses = _race(token, "raced", sets)
    assert Counter(statuses) == {201: 1, 200: 7}, statuses
    service = ConnectedService.objects.get(service="raced")
    stored = opened_set(service)
    assert stored in sets, stored
    assert service.generation == 8

    # And once more as pure replacements of the now existing service.
    statuses = _race(token, "raced", sets[::-1])
    assert Counter(statuses) == {200: 8}, statuses
    assert opened_set(ConnectedService.objects.get(service="raced")) in sets
