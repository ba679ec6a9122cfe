"""Encryption at rest: binding of each ciphertext to its place, key ring parsing,
the masking wrapper, and rotation with `reencrypt`."""

from __future__ import annotations

import base64
import pickle
import re
from io import StringIO

import pytest
from django.core.management import call_command

from services.crypto import DecryptionError, KeyRing, KeyRingError, Place, key_ring
from services.masking import Secret
from services.models import ConnectedService, CredentialField
from services.sealed import OpenedSet
from tests.conftest import KEY_A, KEY_B
from tests.support.helpers import creds, marked

PLACE = Place(account_id=1, service="github", key_name="api_key", generation=3)


def ring(*entries: str) -> KeyRing:
    return KeyRing.parse(",".join(entries))


class TestSealing:
    def test_round_trip(self):
        keys = ring(f"a:{KEY_A}")
        secret = Secret(marked())
        key_id, blob = keys.seal(secret, PLACE)
        assert key_id == "a"
        assert secret.reveal().encode() not in blob
        assert blob[0] == 1
        assert len(blob) == 1 + 12 + len(secret.encode()) + 16
        assert keys.open(key_id, blob, PLACE, field_id=1) == secret

    def test_each_seal_uses_a_fresh_nonce(self):
        keys = ring(f"a:{KEY_A}")
        _, first = keys.seal(Secret("same"), PLACE)
        _, second = keys.seal(Secret("same"), PLACE)
        assert first[1:13] != second[1:13]
        assert first != second

    @pytest.mark.parametrize("position", [0, 1, 12, 13, -1])
    def test_a_flipped_byte_fails_to_open(self, position):
        keys = ring(f"a:{KEY_A}")
        _, blob = keys.seal(Secret("value"), PLACE)
        tampered = bytearray(blob)
        tampered[position] ^= 0x01
        with pytest.raises(DecryptionError) as raised:
            keys.open("a", bytes(tampered), PLACE, field_id=7)
        assert "services_credentialfield id 7 (key id 'a', account 1" in str(raised.value)

    @pytest.mark.parametrize(
        "moved",
        [
            Place(1, "github", "client_secret", 3),
            Place(1, "gitlab", "api_key", 3),
            Place(2, "github", "api_key", 3),
            Place(1, "github", "api_key", 2),
        ],
        ids=["other-keyname", "other-service", "other-account", "other-generation"],
    )
    def test_a_ciphertext_moved_to_another_place_fails_to_open(self, moved):
        keys = ring(f"a:{KEY_A}")
        secret = marked()
        _, blob = keys.seal(Secret(secret), PLACE)
        with pytest.raises(DecryptionError) as raised:
            keys.open("a", blob, moved, field_id=9)
        assert secret not in str(raised.value)

    def test_a_key_missing_from_the_ring_is_named(self):
        _, blob = ring(f"old:{KEY_A}").seal(Secret("v"), PLACE)
        with pytest.raises(DecryptionError, match="'old'"):
            ring(f"new:{KEY_B}").open("old", blob, PLACE, field_id=1)

    def test_the_first_key_seals_and_every_key_opens(self):
        old = ring(f"old:{KEY_A}")
        both = ring(f"new:{KEY_B}", f"old:{KEY_A}")
        key_id, blob = old.seal(Secret("v"), PLACE)
        assert both.open(key_id, blob, PLACE, field_id=1).reveal() == "v"
        assert both.seal(Secret("v"), PLACE)[0] == "new"


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
class TestStoredRows:
    def _field(self, alice_api, service: str, **values: str) -> CredentialField:
        alice_api.store(service, creds(**values))
        return CredentialField.objects.get(
            connected_service__service=service, key_name=next(iter(values))
        )

    def _open(self, field: CredentialField):
        service = field.connected_service
        place = Place(service.account_id, service.service, field.key_name, service.generation)
        return key_ring().open(field.key_id, field.ciphertext, place, field_id=field.pk)

    def test_a_ciphertext_copied_into_another_row_fails_to_open(self, alice_api):
        source = self._field(alice_api, "source", api_key="source-value")
        target = self._field(alice_api, "target", api_key="target-value")
        CredentialField.objects.filter(pk=target.pk).update(ciphertext=source.ciphertext)
        with pytest.raises(DecryptionError, match=f"services_credentialfield id {target.pk} "):
            self._open(CredentialField.objects.get(pk=target.pk))

    def test_an_older_sets_row_copied_back_fails_to_open(self, alice_api):
        old = self._field(alice_api, "custom", api_key="old")
        old_blob = bytes(old.ciphertext)
        alice_api.store("custom", creds(api_key="new"))
        CredentialField.objects.filter(connected_service__service="custom").update(
            ciphertext=old_blob
        )
        with pytest.raises(DecryptionError):
            self._open(CredentialField.objects.get(connected_service__service="custom"))


@pytest.mark.django_db
def test_reencrypt_rotates_every_value_and_keeps_it(alice_api, bob_api, settings):
    settings.CREDVAULT_ENCRYPTION_KEYS = f"old:{KEY_A}"
    expected = {}
    for api, account in ((alice_api, "alice"), (bob_api, "bob")):
        for index in range(4):
            values = {"api_key": marked(f"{account}{index}"), "extra_field": marked()}
            api.store(f"svc-{index}", creds(**values))
            expected[(account, f"svc-{index}")] = values
    assert set(CredentialField.objects.values_list("key_id", flat=True)) == {"old"}

    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"
    out = StringIO()
    call_command("reencrypt", "--batch-size", "5", stdout=out)
    assert "16 value(s) to re-seal" in out.getvalue()
    assert "re-sealed 5/16" in out.getvalue()
    assert "re-sealed 16/16" in out.getvalue()
    assert set(CredentialField.objects.values_list("key_id", flat=True)) == {"new"}
    # Every batch records one event in each account it touched; the chains stay whole.
    from services import audit
    from services.models import Account, AuditEvent

    for account in Account.objects.all():
        rotations = AuditEvent.objects.filter(account=account, action="keys.reencrypt")
        assert rotations.exists()
        assert set(rotations.values_list("token_prefix", flat=True)) == {"cli"}
        assert audit.verify_chain(account)[1] is None

    # The old key can now be dropped: everything opens with the new one alone.
    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B}"
    ring_now = key_ring()
    for service in ConnectedService.objects.select_related("account"):
        opened = {
            field.key_name: ring_now.open(
                field.key_id,
                field.ciphertext,
                Place(service.account_id, service.service, field.key_name, service.generation),
                field_id=1,
            ).reveal()
            for field in service.fields.all()
        }
        assert opened == expected[(service.account.name, service.service)]


@pytest.mark.django_db
def test_reencrypt_resumes_after_an_interruption(alice_api, settings, monkeypatch):
    settings.CREDVAULT_ENCRYPTION_KEYS = f"old:{KEY_A}"
    for index in range(3):
        alice_api.store(f"svc-{index}", creds(api_key=f"value-{index}"))
    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"

    from services import rotation

    real = rotation.reencrypt_batch
    calls = {"n": 0}

    def interrupted(**kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(**kwargs)

    monkeypatch.setattr("services.management.commands.reencrypt.reencrypt_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        call_command("reencrypt", "--batch-size", "1", stdout=StringIO())
    assert sorted(CredentialField.objects.values_list("key_id", flat=True)) == ["new", "old", "old"]
    monkeypatch.setattr("services.management.commands.reencrypt.reencrypt_batch", real)
    out = StringIO()
    call_command("reencrypt", "--batch-size", "1", stdout=out)
    assert "done: 2 re-sealed, 0 remaining" in out.getvalue()


@pytest.mark.django_db
def test_reencrypt_stops_at_a_row_that_does_not_open(alice_api, settings):
    from django.core.management.base import CommandError

    settings.CREDVAULT_ENCRYPTION_KEYS = f"old:{KEY_A}"
    alice_api.store("custom", creds(api_key="value"))
    field = CredentialField.objects.get()
    sealed = bytes(field.ciphertext)
    # The last byte of the tag flipped (set to a fixed value, it was that value 1 time in 256).
    CredentialField.objects.filter(pk=field.pk).update(
        ciphertext=sealed[:-1] + bytes([sealed[-1] ^ 0x01])
    )
    settings.CREDVAULT_ENCRYPTION_KEYS = f"new:{KEY_B},old:{KEY_A}"
    account = field.connected_service.account_id
    row = (
        f"services_credentialfield id {field.pk} (key id 'old', account {account}, "
        "service 'custom', keyName 'api_key')"
    )
    with pytest.raises(CommandError, match=re.escape(row)):
        call_command("reencrypt", stdout=StringIO())
    assert CredentialField.objects.get().key_id == "old"


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
