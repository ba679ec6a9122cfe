"""The benchmark's hand-built ceiling (scripts/ceiling.py) measures what it says: each version
answers the same list as credvault's own, and writes what its name says (the chained event
through credvault's append, an unchained event, or nothing). PostgreSQL only, as the ceiling."""

from __future__ import annotations

import pytest
from django.db import connection

from scripts.ceiling import SCRATCH_TABLE, create_scratch_table
from services import audit, tokens
from services.models import Account, AuditAction, AuditEvent, AuditOutcome

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _ceiling(settings) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the benchmark's hand-built ceiling runs on PostgreSQL only")
    settings.ROOT_URLCONF = "scripts.ceiling"
    with connection.cursor() as cursor:
        create_scratch_table(cursor)  # undone with the test's transaction


def _scratch_events() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {SCRATCH_TABLE}")  # noqa: S608 (a constant)
        return cursor.fetchone()[0]


@pytest.fixture
def stored(alice_api) -> list[dict]:
    for service in ("github", "openai", "my-internal-api"):
        response = alice_api.store(service, [{"keyName": "api_key", "value": "v" * 20}])
        assert response.status_code == 201
    listed = alice_api.list()
    assert listed.status_code == 200
    return listed.json()


def _get(alice_api, kind: str):
    return alice_api.client.get(f"/ceiling/{kind}", headers=alice_api.headers())


@pytest.mark.parametrize("kind", ["chained", "insert", "read"])
def test_each_version_answers_credvaults_list(alice_api, stored, kind):
    response = _get(alice_api, kind)
    assert response.status_code == 200
    assert response.json() == stored
    assert len(stored) == 3


def test_the_chained_version_appends_to_the_accounts_chain(alice, alice_api, stored):
    seq = Account.objects.get(pk=alice.pk).audit_seq
    assert _get(alice_api, "chained").status_code == 200
    account = Account.objects.get(pk=alice.pk)
    assert account.audit_seq == seq + 1
    event = AuditEvent.objects.get(account=account, seq=seq + 1)
    assert (event.action, event.outcome, event.status) == (
        AuditAction.SERVICES_LIST,
        AuditOutcome.SUCCESS,
        200,
    )
    checked, broken = audit.verify_chain(account)
    assert (checked, broken) == (seq + 1, None)
    assert _scratch_events() == 0


def test_the_insert_version_writes_an_unchained_event(alice, alice_api, stored):
    seq = Account.objects.get(pk=alice.pk).audit_seq
    assert _get(alice_api, "insert").status_code == 200
    assert _scratch_events() == 1
    assert Account.objects.get(pk=alice.pk).audit_seq == seq


def test_the_read_version_writes_nothing(alice, alice_api, stored):
    seq = Account.objects.get(pk=alice.pk).audit_seq
    assert _get(alice_api, "read").status_code == 200
    assert _scratch_events() == 0
    assert Account.objects.get(pk=alice.pk).audit_seq == seq


@pytest.mark.parametrize("kind", ["chained", "insert", "read"])
def test_an_unknown_token_gets_nothing(anonymous_api, kind):
    unknown = tokens.generate().plaintext  # well formed, never stored
    response = anonymous_api.client.get(
        f"/ceiling/{kind}", headers={"Authorization": f"Bearer {unknown}"}
    )
    assert response.status_code == 401
    assert _scratch_events() == 0
