"""`migrate_key_manager` from the local ring to moto's KMS server and to a SoftHSM2 token, on a
database with values of every sealed kind: some sealed before data keys (directly by the ring),
the rest by data keys the ring wraps. Interrupted, then run again; then the ring is removed and
every value still opens."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from services.audit import Actor
from services.checks import check_key_manager
from services.management.commands import migrate_key_manager
from services.models import Account, DataKey
from services.sealed import KINDS
from services.webhooks.endpoints import create_endpoint
from tests.conftest import KEY_A, TEST_KEYS, use_key_manager
from tests.support.helpers import (
    creds,
    killed_at_the_second_batch,
    marked,
    opened_values,
    put_client,
    reseal_before_data_keys,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("target", ["aws-kms", "pkcs11"])
def test_a_database_of_the_ring_moves_to_a_key_manager(
    request, settings, monkeypatch, alice_api, bob_api, stand_in, target
):
    settings.CREDVAULT_WEBHOOK_ALLOWED_HOSTS = "127.0.0.1"
    for api in (alice_api, bob_api):
        assert api.store("custom", creds(api_key=marked(), other=marked())).status_code == 201
    assert put_client(alice_api, "github", marked("client-secret")).status_code == 201
    alice = Account.objects.get(name="alice")
    create_endpoint(actor=Actor.command(alice.pk), url="http://127.0.0.1:9/hook")
    assert check_key_manager(None, databases=["default"]) == []  # seals the canary
    # One value of every kind as it was stored before data keys: sealed by the ring's key.
    ring_id = TEST_KEYS.split(":", 1)[0]
    for kind in KINDS:
        row = kind.model._default_manager.select_related(*kind.related).order_by("pk").first()
        reseal_before_data_keys(kind, row, key=KEY_A, key_id=ring_id)
    values = opened_values()
    assert len(values) == 6  # alice's and bob's 2 fields each, a client and a webhook secret
    assert {kind.name for kind in KINDS} == {name for name, _ in values}

    use_key_manager(request, settings, monkeypatch, target)
    warnings = [w.msg for w in check_key_manager(None, databases=["default"])]
    assert warnings
    assert all("local:" in w for w in warnings)

    # Killed in the middle of its second step, then run again: it continues.
    with (
        killed_at_the_second_batch(monkeypatch, migrate_key_manager, "reseal_ring_batch"),
        pytest.raises(KeyboardInterrupt),
    ):
        call_command("migrate_key_manager", "--batch-size", "1", stdout=StringIO())
    out = StringIO()
    call_command("migrate_key_manager", "--batch-size", "1", stdout=out)
    assert out.getvalue().splitlines()[-1].endswith("; the old ring can be removed")

    assert {row.wrapped_by.split(":", 1)[0] for row in DataKey.objects.all()} == {target}
    assert all(
        key_id.startswith("dk_")
        for kind in KINDS
        for key_id in kind.model._default_manager.values_list("key_id", flat=True)
    )
    # The ring removed: every value opens through the key manager alone.
    settings.CREDVAULT_ENCRYPTION_KEYS = ""
    from services.keys import managers

    managers._built.cache_clear()
    assert opened_values() == values
    assert check_key_manager(None, databases=["default"]) == []
