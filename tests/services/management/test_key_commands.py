"""`rotate_keys` and `migrate_key_manager` under the local ring: data keys wrapped again under
the ring's new first key, values untouched and still open once the old key is dropped, and the
refusals of `migrate_key_manager` where there is nothing to migrate from or to."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from services.checks import check_key_manager
from services.models import DataKey
from services.sealed import KINDS
from tests.conftest import KEY_A, KEY_B
from tests.support.helpers import (
    creds,
    killed_at_the_second_batch,
    marked,
    opened_values,
    put_client,
)

OLD = f"old:{KEY_A}"
NEW = f"new:{KEY_B}"


def rewrap_warnings() -> list[str]:
    return [
        issue.msg
        for issue in check_key_manager(None, databases=["default"])
        if issue.id == "credvault.W033"
    ]


def sealed_rows() -> dict[tuple[str, int], tuple[str, bytes]]:
    return {
        (kind.name, row.pk): (row.key_id, bytes(getattr(row, kind.ciphertext)))
        for kind in KINDS
        for row in kind.model._default_manager.all()
    }


@pytest.mark.django_db
def test_rotate_keys_wraps_every_data_key_under_the_new_ring_key(
    alice_api, bob_api, stand_in, settings
):
    settings.CREDVAULT_ENCRYPTION_KEYS = OLD
    for api in (alice_api, bob_api):
        assert api.store("custom", creds(api_key=marked(), other=marked())).status_code == 201
    assert put_client(alice_api, "github", marked("client-secret")).status_code == 201
    assert check_key_manager(None, databases=["default"]) == []  # seals the canary under old
    values, stored = opened_values(), sealed_rows()
    # Three data keys: Alice's, Bob's and the canary's.
    assert list(DataKey.objects.values_list("wrapped_by", flat=True)) == ["local:old"] * 3

    settings.CREDVAULT_ENCRYPTION_KEYS = f"{NEW},{OLD}"
    assert rewrap_warnings() == [
        "3 data key(s) are wrapped by local:old, which is not the current key-encryption key "
        "(local:new)."
    ]
    out = StringIO()
    call_command("rotate_keys", "--batch-size", "2", stdout=out)
    assert out.getvalue().splitlines() == [
        "3 data key(s) to wrap under local:new",
        "rewrapped 2/3",
        "rewrapped 3/3",
        # The local ring counts no calls (it is no remote manager).
        "done: 3 data key(s) rewrapped under local:new, 0 key-manager call(s)",
    ]
    assert list(DataKey.objects.values_list("wrapped_by", flat=True)) == ["local:new"] * 3
    assert rewrap_warnings() == []
    # No value was sealed again: the same key ids and bytes.
    assert sealed_rows() == stored

    settings.CREDVAULT_ENCRYPTION_KEYS = NEW
    assert opened_values() == values
    assert check_key_manager(None, databases=["default"]) == []

    # Run again, it finds nothing to do.
    out = StringIO()
    call_command("rotate_keys", stdout=out)
    assert out.getvalue().splitlines()[-1] == (
        "done: 0 data key(s) rewrapped under local:new, 0 key-manager call(s)"
    )


@pytest.mark.django_db
def test_rotate_keys_is_resumable(alice_api, bob_api, settings, monkeypatch):
    settings.CREDVAULT_ENCRYPTION_KEYS = OLD
    for api in (alice_api, bob_api):
        assert api.store("custom", creds(api_key=marked())).status_code == 201
    settings.CREDVAULT_ENCRYPTION_KEYS = f"{NEW},{OLD}"

    from services.management.commands import rotate_keys

    with (
        killed_at_the_second_batch(monkeypatch, rotate_keys, "rewrap_batch"),
        pytest.raises(KeyboardInterrupt),
    ):
        call_command("rotate_keys", "--batch-size", "1", stdout=StringIO())
    assert sorted(DataKey.objects.values_list("wrapped_by", flat=True)) == [
        "local:new",
        "local:old",
    ]
    out = StringIO()
    call_command("rotate_keys", "--batch-size", "1", stdout=out)
    assert "done: 1 data key(s) rewrapped under local:new" in out.getvalue()
    assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {"local:new"}


@pytest.mark.django_db
def test_rotate_keys_refuses_in_one_line_when_a_key_is_not_in_the_ring(alice_api, settings):
    settings.CREDVAULT_ENCRYPTION_KEYS = OLD
    value = marked()
    assert alice_api.store("custom", creds(api_key=value)).status_code == 201
    settings.CREDVAULT_ENCRYPTION_KEYS = NEW
    with pytest.raises(CommandError) as raised:
        call_command("rotate_keys", stdout=StringIO())
    message = str(raised.value)
    assert message.startswith("stopped after 0 rewrapped: ")
    assert "'local:old', which CREDVAULT_ENCRYPTION_KEYS does not hold" in message
    assert "\n" not in message
    assert KEY_A not in message
    assert value not in message
    assert DataKey.objects.get().wrapped_by == "local:old"


@pytest.mark.django_db
def test_migrate_key_manager_refuses_under_the_local_ring():
    with pytest.raises(CommandError, match="CREDVAULT_KEY_MANAGER is local"):
        call_command("migrate_key_manager", stdout=StringIO())


@pytest.mark.django_db
def test_migrate_key_manager_refuses_without_the_old_ring(settings):
    settings.CREDVAULT_KEY_MANAGER = "aws-kms"
    settings.CREDVAULT_KMS_KEY_ID = "alias/credvault"
    settings.CREDVAULT_ENCRYPTION_KEYS = ""
    with pytest.raises(CommandError, match="must still hold the old ring"):
        call_command("migrate_key_manager", stdout=StringIO())
