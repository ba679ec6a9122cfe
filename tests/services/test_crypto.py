"""Encryption at rest: each value sealed by its account's data key and bound to its place, the
values sealed before data keys, key ring parsing, the masking wrapper, and rotation with
`reencrypt`."""

from __future__ import annotations

import base64
import dataclasses
import pickle
import re
from io import StringIO

import pytest
from django.core.management import call_command

from services.crypto import DecryptionError, KeyRing, KeyRingError, Place
from services.keys import data_keys, envelope
from services.masking import Secret
from services.models import (
    Account,
    ConnectedService,
    CredentialField,
    DataKey,
    OAuthClient,
    WebhookSecret,
)
from services.sealed import CREDENTIAL_FIELDS, KINDS, OpenedSet
from tests.conftest import KEY_A, KEY_B
from tests.support.helpers import (
    creds,
    marked,
    opened_values,
    put_client,
    reseal_before_data_keys,
    seal_before_data_keys,
)

REFERENCE = re.compile(r"dk_[0-9a-f]{16}\.(\d+)")


def ring(*entries: str) -> KeyRing:
    return KeyRing.parse(",".join(entries))


@pytest.fixture
def place(alice) -> Place:
    return Place(account_id=alice.pk, service="github", key_name="api_key", generation=3)


@pytest.mark.django_db
@pytest.mark.usefixtures("each_key_manager")
class TestSealing:
    def test_round_trip_under_the_accounts_data_key(self, place, alice, each_key_manager):
        secret = Secret(marked())
        key_id, blob = envelope.seal(secret, place)
        data_key = DataKey.objects.get(account=alice)
        assert key_id == data_key.reference
        assert REFERENCE.fullmatch(key_id).group(1) == "1"
        assert data_key.wrapped_by.startswith(f"{each_key_manager}:")
        if each_key_manager == "local":
            assert data_key.wrapped_by == "local:test-a"
        assert secret.reveal().encode() not in blob
        assert blob[0] == 2
        assert len(blob) == 1 + 12 + len(secret.encode()) + 16
        assert envelope.open(key_id, blob, place, field_id=1) == secret

    def test_each_seal_uses_a_fresh_nonce(self, place):
        _, first = envelope.seal(Secret("same"), place)
        _, second = envelope.seal(Secret("same"), place)
        assert first[1:13] != second[1:13]
        assert first != second

    def test_each_account_has_its_own_data_key(self, place, bob):
        alice_key, _ = envelope.seal(Secret("v"), place)
        bob_key, _ = envelope.seal(Secret("v"), dataclasses.replace(place, account_id=bob.pk))
        assert alice_key.split(".")[0] != bob_key.split(".")[0]
        assert DataKey.objects.get(account=bob).reference == bob_key

    @pytest.mark.parametrize("position", [0, 1, 12, 13, -1])
    def test_a_flipped_byte_fails_to_open(self, position, place):
        key_id, blob = envelope.seal(Secret("value"), place)
        tampered = bytearray(blob)
        tampered[position] ^= 0x01
        with pytest.raises(DecryptionError) as raised:
            envelope.open(key_id, bytes(tampered), place, field_id=7)
        assert (
            f"services_credentialfield id 7 (key id '{key_id}', account {place.account_id}"
            in str(raised.value)
        )

    @pytest.mark.parametrize(
        "moved",
        [
            {"key_name": "client_secret"},
            {"service": "gitlab"},
            {"account_id": "bob"},
            {"generation": 2},
        ],
        ids=["other-keyname", "other-service", "other-account", "other-generation"],
    )
    def test_a_ciphertext_moved_to_another_place_fails_to_open(self, moved, place, bob):
        secret = marked()
        key_id, blob = envelope.seal(Secret(secret), place)
        if moved.get("account_id") == "bob":
            # Bob has a data key of his own: the value still names Alice's.
            envelope.seal(Secret("bob's"), dataclasses.replace(place, account_id=bob.pk))
            moved = {"account_id": bob.pk}
        with pytest.raises(DecryptionError) as raised:
            envelope.open(key_id, blob, dataclasses.replace(place, **moved), field_id=9)
        assert secret not in str(raised.value)

    def test_a_value_under_another_data_key_fails_to_open(self, place, alice):
        _, blob = envelope.seal(Secret("v"), place)
        data_keys.create_version(alice.pk)
        newer = DataKey.objects.get(account=alice, version=2).reference
        # The value names version 1; claimed for version 2 it does not open.
        with pytest.raises(DecryptionError, match=re.escape(f"key id '{newer}'")):
            envelope.open(newer, blob, place, field_id=1)

    def test_a_value_names_its_data_key_version_and_every_version_opens(self, place, alice):
        first_id, first = envelope.seal(Secret("first"), place)
        data_keys.cache.clear()
        row, _ = data_keys.create_version(alice.pk)
        second_id, second = envelope.seal(Secret("second"), place)
        assert REFERENCE.fullmatch(first_id).group(1) == "1"
        assert second_id == row.reference
        assert REFERENCE.fullmatch(second_id).group(1) == "2"
        assert first_id.split(".")[0] == second_id.split(".")[0]
        data_keys.cache.clear()
        assert envelope.open(first_id, first, place, field_id=1).reveal() == "first"
        assert envelope.open(second_id, second, place, field_id=2).reveal() == "second"

    def test_a_value_naming_a_data_key_the_account_lacks_is_named(self, place):
        key_id, blob = envelope.seal(Secret("v"), place)
        DataKey.objects.filter(account_id=place.account_id).delete()
        data_keys.cache.clear()
        with pytest.raises(DecryptionError, match="names a data key that this account does not"):
            envelope.open(key_id, blob, place, field_id=1)


@pytest.mark.django_db
def test_the_first_ring_key_wraps_and_every_ring_key_unwraps(place, bob, settings):
    settings.CREDVAULT_ENCRYPTION_KEYS = f"old:{KEY_A}"
    key_id, blob = envelope.seal(Secret("v"), place)
    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"
    data_keys.cache.clear()
    assert envelope.open(key_id, blob, place, field_id=1).reveal() == "v"
    envelope.seal(Secret("v"), dataclasses.replace(place, account_id=bob.pk))
    assert DataKey.objects.get(account_id=place.account_id).wrapped_by == "local:old"
    assert DataKey.objects.get(account=bob).wrapped_by == "local:new"


@pytest.mark.django_db
class TestSealedBeforeDataKeys:
    """A value sealed directly by a ring key (format 1) opens while the ring holds that key."""

    def test_it_opens_while_its_ring_key_is_given(self, place, settings):
        settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"
        blob = seal_before_data_keys(KEY_A, "old", "before", place)
        assert envelope.open("old", blob, place, field_id=1).reveal() == "before"
        assert not DataKey.objects.exists()

    def test_it_is_bound_to_its_place_and_key_id(self, place, bob, settings):
        settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"
        blob = seal_before_data_keys(KEY_A, "old", "before", place)
        for moved in (
            dataclasses.replace(place, account_id=bob.pk),
            dataclasses.replace(place, generation=4),
        ):
            with pytest.raises(DecryptionError, match="failed authentication"):
                envelope.open("old", blob, moved, field_id=1)
        # Named as sealed by another ring key, it does not open with that key.
        with pytest.raises(DecryptionError, match="failed authentication"):
            envelope.open("new", blob, place, field_id=1)

    def test_a_ring_key_dropped_from_the_ring_is_named(self, place, settings):
        blob = seal_before_data_keys(KEY_A, "old", "before", place)
        settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B}"
        with pytest.raises(DecryptionError) as raised:
            envelope.open("old", blob, place, field_id=1)
        assert "key id 'old'" in str(raised.value)
        assert "not in CREDVAULT_ENCRYPTION_KEYS" in str(raised.value)


class TestKeyRingParsing:
    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            ("", "not set"),
            ("nocolon", "KEYID:BASE64KEY"),
            ("a:not base64!", "not valid base64"),
            (f"a:{base64.b64encode(b'short').decode()}", "5 bytes"),
            (f"a:{KEY_A},a:{KEY_B}", "duplicate key id"),
            (f"bad id:{KEY_A}", "key id"),
        ],
    )
    def test_malformed_rings_are_refused_without_key_material(self, raw, message):
        with pytest.raises(KeyRingError, match=message) as raised:
            KeyRing.parse(raw)
        assert KEY_A not in str(raised.value)
        assert KEY_B not in str(raised.value)

    def test_repr_shows_ids_only(self):
        assert KEY_A not in repr(ring(f"a:{KEY_A}"))


class TestSecret:
    def test_str_repr_and_format_are_masked(self):
        value = marked()
        secret = Secret(value)
        for shown in (str(secret), repr(secret), f"{secret}", f"{secret!r}", str([secret])):
            assert value not in shown

    def test_cannot_be_pickled(self):
        with pytest.raises(TypeError):
            pickle.dumps(Secret("v"))


@pytest.mark.django_db
@pytest.mark.usefixtures("each_key_manager")
class TestStoredRows:
    def _field(self, api, service: str, **values: str) -> CredentialField:
        api.store(service, creds(**values))
        # The newest such field: the account's that just stored it.
        return CredentialField.objects.filter(
            connected_service__service=service, key_name=next(iter(values))
        ).latest("pk")

    def _open(self, field: CredentialField) -> Secret:
        return CREDENTIAL_FIELDS.open(CredentialField.objects.get(pk=field.pk))

    def test_a_ciphertext_copied_into_another_row_fails_to_open(self, alice_api):
        source = self._field(alice_api, "source", api_key="source-value")
        target = self._field(alice_api, "target", api_key="target-value")
        assert source.key_id == target.key_id  # one data key: only the place tells them apart
        CredentialField.objects.filter(pk=target.pk).update(ciphertext=source.ciphertext)
        with pytest.raises(DecryptionError, match=f"services_credentialfield id {target.pk} "):
            self._open(target)

    def test_a_ciphertext_copied_into_another_field_fails_to_open(self, alice_api):
        source = self._field(alice_api, "custom", api_key="v1", other="v2")
        other = CredentialField.objects.get(key_name="other")
        CredentialField.objects.filter(pk=other.pk).update(ciphertext=source.ciphertext)
        with pytest.raises(DecryptionError, match=f"services_credentialfield id {other.pk} "):
            self._open(other)

    def test_a_row_copied_into_another_account_fails_to_open(self, alice_api, bob_api):
        source = self._field(alice_api, "custom", api_key="alice-value")
        target = self._field(bob_api, "custom", api_key="bob-value")
        # Alice's key id and ciphertext both: Bob's account has no such data key.
        CredentialField.objects.filter(pk=target.pk).update(
            key_id=source.key_id, ciphertext=source.ciphertext
        )
        with pytest.raises(DecryptionError, match="names a data key that this account does not"):
            self._open(target)
        # Bob's key id with Alice's ciphertext: the key and the place are Bob's, the value not.
        CredentialField.objects.filter(pk=target.pk).update(key_id=target.key_id)
        with pytest.raises(DecryptionError, match="failed authentication"):
            self._open(target)

    def test_an_older_sets_row_copied_back_fails_to_open(self, alice_api):
        old = self._field(alice_api, "custom", api_key="old")
        old_blob = bytes(old.ciphertext)
        alice_api.store("custom", creds(api_key="new"))
        CredentialField.objects.filter(connected_service__service="custom").update(
            ciphertext=old_blob
        )
        with pytest.raises(DecryptionError):
            self._open(CredentialField.objects.get(connected_service__service="custom"))


def sealed_rows() -> dict[tuple[str, int], tuple[str, bytes]]:
    """Every sealed value of every kind: (kind, pk) -> (key id, ciphertext)."""
    return {
        (kind.name, row.pk): (row.key_id, bytes(getattr(row, kind.ciphertext)))
        for kind in KINDS
        for row in kind.model._default_manager.all()
    }


def versions() -> dict[str, list[int]]:
    return {
        account.name: list(
            DataKey.objects.filter(account=account)
            .order_by("version")
            .values_list("version", flat=True)
        )
        for account in Account.objects.all()
    }


@pytest.mark.django_db
def test_reencrypt_seals_every_value_under_a_new_data_key_and_keeps_it(alice_api, bob_api):
    for api, account in ((alice_api, "alice"), (bob_api, "bob")):
        for index in range(4):
            values = {"api_key": marked(f"{account}{index}"), "extra_field": marked()}
            api.store(f"svc-{index}", creds(**values))
    before = opened_values()
    first = {name: DataKey.objects.get(account__name=name).reference for name in ("alice", "bob")}
    assert {
        name: set(
            CredentialField.objects.filter(connected_service__account__name=name).values_list(
                "key_id", flat=True
            )
        )
        for name in first
    } == {name: {reference} for name, reference in first.items()}

    out = StringIO()
    call_command("reencrypt", "--batch-size", "5", stdout=out)
    assert "16 value(s) to seal under new data keys" in out.getvalue()
    assert "re-sealed 5/16" in out.getvalue()
    assert "re-sealed 16/16" in out.getvalue()
    assert "done: 16 re-sealed, 0 remaining" in out.getvalue()
    # One new version per account, however many batches touched it; every value names it.
    assert versions() == {"alice": [1, 2], "bob": [1, 2]}
    for name in first:
        newest = DataKey.objects.get(account__name=name, version=2).reference
        assert set(
            CredentialField.objects.filter(connected_service__account__name=name).values_list(
                "key_id", flat=True
            )
        ) == {newest}
    # Every batch records one event in each account it touched; the chains stay whole.
    from services import audit
    from services.models import AuditEvent

    for account in Account.objects.all():
        rotations = AuditEvent.objects.filter(account=account, action="keys.reencrypt")
        assert rotations.exists()
        assert set(rotations.values_list("token_prefix", flat=True)) == {"cli"}
        assert audit.verify_chain(account)[1] is None

    # The first versions can now be shredded: every value opens under the new ones alone.
    DataKey.objects.filter(version=1, account__isnull=False).delete()
    assert opened_values() == before
    for service in ConnectedService.objects.all():
        assert service.fields.count() == 2


def every_kind(alice_api, bob_api) -> None:
    """Credential fields, an OAuth client secret and a webhook secret in each account."""
    for api in (alice_api, bob_api):
        for index in range(2):
            assert (
                api.store(f"svc-{index}", creds(api_key=marked(), other=marked())).status_code
                == 201
            )
        assert put_client(api, "github", marked("client-secret")).status_code == 201
        webhook = api.raw("POST", "/api/v1/webhooks", '{"url": "https://hooks.example.com/"}')
        assert webhook.status_code == 201, webhook.content


@pytest.mark.django_db
def test_reencrypt_resumes_the_same_run_after_an_interruption(
    alice_api, bob_api, stand_in, monkeypatch
):
    every_kind(alice_api, bob_api)
    assert CredentialField.objects.count() == 8
    assert OAuthClient.objects.count() == WebhookSecret.objects.count() == 2
    before = sealed_rows()
    values = opened_values()
    total = len(before)

    from services import rotation
    from services.models import Reencryption

    real = rotation.seal_value
    sealed = {"n": 0}

    def killed_in_the_second_batch(*args, **kwargs):
        sealed["n"] += 1
        if sealed["n"] == 5:  # the second value of the second batch of 3
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(rotation, "seal_value", killed_in_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        call_command("reencrypt", "--batch-size", "3", stdout=StringIO())
    monkeypatch.setattr(rotation, "seal_value", real)

    # The first batch is done; the second rolled back whole.
    interrupted = sealed_rows()
    changed = {place for place in before if interrupted[place] != before[place]}
    assert len(changed) == 3
    # Alice's new version came with the first batch; Bob's went with the second.
    assert versions() == {"alice": [1, 2], "bob": [1]}
    [run] = Reencryption.objects.all()
    assert run.finished_at is None

    out = StringIO()
    call_command("reencrypt", "--batch-size", "3", stdout=out)
    assert f"{total - 3} value(s) to seal under new data keys" in out.getvalue()
    assert f"done: {total - 3} re-sealed, 0 remaining" in out.getvalue()
    after = sealed_rows()
    # The values of the first batch were not sealed again; every other one was.
    assert {place for place in before if after[place] == interrupted[place]} == changed
    # The same run, finished; each account got exactly one new version, naming every value.
    [run] = Reencryption.objects.all()
    assert run.finished_at is not None
    assert versions() == {"alice": [1, 2], "bob": [1, 2]}
    newest = {key.account_id: key.reference for key in DataKey.objects.filter(version=2)}
    assert {key_id for key_id, _ in after.values()} == set(newest.values())
    assert opened_values() == values


@pytest.mark.django_db
def test_reencrypt_stops_at_a_row_that_does_not_open(alice_api):
    from django.core.management.base import CommandError

    alice_api.store("custom", creds(api_key="value"))
    field = CredentialField.objects.get()
    sealed = bytes(field.ciphertext)
    # The last byte of the tag flipped (set to a fixed value, it was that value 1 time in 256).
    CredentialField.objects.filter(pk=field.pk).update(
        ciphertext=sealed[:-1] + bytes([sealed[-1] ^ 0x01])
    )
    account = field.connected_service.account_id
    row = (
        f"services_credentialfield id {field.pk} (key id '{field.key_id}', account {account}, "
        "service 'custom', keyName 'api_key')"
    )
    with pytest.raises(CommandError, match=re.escape(row)):
        call_command("reencrypt", stdout=StringIO())
    assert CredentialField.objects.get().key_id == field.key_id
    assert bytes(CredentialField.objects.get().ciphertext) != sealed


@pytest.mark.django_db
def test_reencrypt_seals_values_sealed_before_data_keys_under_a_data_key(alice_api, settings):
    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"
    alice_api.store("custom", creds(api_key="before"))
    reseal_before_data_keys(
        CREDENTIAL_FIELDS, CredentialField.objects.get(), key=KEY_A, key_id="old"
    )
    assert CredentialField.objects.get().key_id == "old"
    call_command("reencrypt", stdout=StringIO())
    field = CredentialField.objects.get()
    assert REFERENCE.fullmatch(field.key_id)
    assert bytes(field.ciphertext)[0] == 2
    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B}"
    assert opened_values() == {("credential field", field.pk): "before"}


def test_an_opened_set_keeps_its_order_is_read_by_keyname_and_shows_no_value():
    opened = OpenedSet([("api_key", Secret("v-one")), ("account", Secret("v-two"))])
    assert [name for name, _ in opened] == opened.names == ["api_key", "account"]
    assert len(opened) == 2
    assert opened.by_name["account"].reveal() == "v-two"
    assert opened.by_name is opened.by_name  # built once
    more = opened.plus([("extra", Secret("v-three"))])
    assert more.names == ["api_key", "account", "extra"]
    assert opened.names == ["api_key", "account"]
    assert "v-" not in repr(opened) + repr(more)
