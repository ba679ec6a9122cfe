"""Envelope encryption under each key manager, with the real ones: moto's KMS server and a
SoftHSM2 token (tests/support/key_managers.py). An outage is the KMS process stopped."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from services.crypto import DecryptionError, Place
from services.keys import data_keys, envelope, managers
from services.masking import Secret
from services.models import Account, ConnectedService, CredentialField, DataKey
from tests.conftest import use_key_manager
from tests.support.harness import server_env
from tests.support.helpers import (
    agent_token,
    assert_problem,
    creds,
    marked,
    opened_set,
    put_agent,
    read,
)
from tests.support.key_managers import MOTO_KMS_ALIAS, SOFTHSM_KEY_LABEL, MotoKms

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def agent_token_for(alice_api):
    """A token of an agent of alice's granted `service`."""

    def make(service: str) -> str:
        assert put_agent(alice_api, "reader", [service]).status_code == 201
        return agent_token(alice_api, "reader")

    return make


class TestEachKeyManager:
    def test_a_stored_set_is_sealed_by_the_accounts_data_key_and_opens(
        self, each_key_manager, alice_api
    ):
        secret = marked("each-manager")
        assert alice_api.store("github", creds(api_key=secret)).status_code == 201
        key = DataKey.objects.get()
        assert key.wrapped_by.startswith(f"{each_key_manager}:")
        assert key.account_id == Account.objects.get(name="alice").pk
        field = CredentialField.objects.get()
        assert field.key_id == key.reference
        assert bytes(field.ciphertext)[0] == 2
        assert secret.encode() not in bytes(field.ciphertext)
        data_keys.cache.clear()
        assert opened_set(ConnectedService.objects.get()) == {"api_key": secret}

    def test_a_ciphertext_moved_to_another_account_does_not_open(self, each_key_manager):
        for name in ("alice", "bob"):
            Account.objects.create(name=name)
        alice, bob = Account.objects.order_by("pk")
        place = Place(alice.pk, "github", "api_key", 1)
        secret = marked("moved")
        key_id, sealed = envelope.seal(Secret(secret), place)
        envelope.seal(Secret("bob's"), Place(bob.pk, "github", "api_key", 1))
        data_keys.cache.clear()
        assert envelope.open(key_id, sealed, place, field_id=1).reveal() == secret
        for elsewhere in (
            Place(bob.pk, "github", "api_key", 1),
            Place(alice.pk, "gitlab", "api_key", 1),
            Place(alice.pk, "github", "token", 1),
            Place(alice.pk, "github", "api_key", 2),
        ):
            with pytest.raises(DecryptionError):
                envelope.open(key_id, sealed, elsewhere, field_id=1)

    def test_reads_at_steady_state_call_the_key_manager_once_per_account(
        self, each_key_manager, alice_api, agent_token_for
    ):
        alice_api.store("github", creds(api_key=marked("steady")))
        reader = agent_token_for("github")
        data_keys.forget_uncommitted()
        data_keys.cache.clear()
        manager = managers.key_manager()
        before = manager.calls
        for _ in range(50):
            assert read(reader, "github").status_code == 200
        assert manager.calls - before == (0 if each_key_manager == "local" else 1)


class TestTheCache:
    def test_a_key_is_unwrapped_again_after_its_uses(self, settings, each_key_manager):
        settings.CREDVAULT_DATA_KEY_CACHE_USES = 3
        account = Account.objects.create(name="alice")
        place = Place(account.pk, "github", "api_key", 1)
        key_id, sealed = envelope.seal(Secret("v"), place)
        data_keys.forget_uncommitted()
        data_keys.cache.clear()
        manager = managers.key_manager()
        before = manager.calls
        for _ in range(7):
            envelope.open(key_id, sealed, place, field_id=1)
        unwraps = manager.calls - before
        assert unwraps == (0 if each_key_manager == "local" else 3)  # uses 1-3, 4-6, 7

    def test_a_key_is_unwrapped_again_after_its_seconds(self, settings, monkeypatch):
        settings.CREDVAULT_DATA_KEY_CACHE_SECONDS = 300
        account = Account.objects.create(name="alice")
        place = Place(account.pk, "github", "api_key", 1)
        key_id, sealed = envelope.seal(Secret("v"), place)
        data_keys.forget_uncommitted()
        data_keys.cache.clear()
        envelope.open(key_id, sealed, place, field_id=1)
        assert len(data_keys.cache) == 1
        now = time.monotonic()
        monkeypatch.setattr(data_keys.time, "monotonic", lambda: now + 301)
        assert data_keys.cache.cipher(key_id, account_id=account.pk) is None
        assert len(data_keys.cache) == 0


@pytest.fixture
def own_kms(settings, monkeypatch):
    """A KMS of the test's own, which it may stop."""
    kms = MotoKms().start()
    kms.create_key(alias=MOTO_KMS_ALIAS)
    for variable, value in kms.env.items():
        monkeypatch.setenv(variable, value)
    settings.CREDVAULT_KEY_MANAGER = "aws-kms"
    settings.CREDVAULT_KMS_KEY_ID = MOTO_KMS_ALIAS
    managers._built.cache_clear()
    yield kms
    kms.close()
    managers._built.cache_clear()


class TestAnOutage:
    def test_with_the_kms_stopped_what_is_not_cached_is_503_and_nothing_is_written(
        self, own_kms, alice_api, agent_token_for, client
    ):
        secret = marked("outage")
        assert alice_api.store("github", creds(api_key=secret)).status_code == 201
        reader = agent_token_for("github")
        data_keys.forget_uncommitted()
        data_keys.cache.clear()
        assert client.get("/readyz").status_code == 200  # the canary's key, now cached
        assert read(reader, "github").status_code == 200  # alice's key, now cached
        own_kms.stop()
        # Cached: the read goes on.
        assert read(reader, "github").status_code == 200
        data_keys.cache.clear()
        response = read(reader, "github")
        assert_problem(response, 503, "key_manager_unavailable")
        assert secret.encode() not in response.content
        assert_problem(client.get("/readyz"), 503, "key_manager_unavailable")
        # A store that needs a key not cached writes nothing: no service, no field, no key.
        services, fields, keys = (
            ConnectedService.objects.count(),
            CredentialField.objects.count(),
            DataKey.objects.count(),
        )
        response = alice_api.store("openai", creds(api_key=marked("half")))
        assert_problem(response, 503, "key_manager_unavailable")
        assert (
            ConnectedService.objects.count(),
            CredentialField.objects.count(),
            DataKey.objects.count(),
        ) == (services, fields, keys)


def _check(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    """`manage.py migrate` (as `make run` and the systemd unit run it) on a database of its own
    migrated before: it runs the database checks, the start-up self-check among them, and
    reports a failing one in one line (`manage.py check --database default` prints the full
    report)."""
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env = server_env(database, CREDVAULT_ENV_FILE="")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    env.update(overrides)
    return subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_line(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Refused in one line that says the cause, never a traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], result.stderr


@pytest.mark.slow
class TestBadInput:
    def test_an_unknown_manager(self, tmp_path):
        database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
        env = server_env(database, CREDVAULT_ENV_FILE="", CREDVAULT_KEY_MANAGER="vault")
        result = subprocess.run(
            [sys.executable, "manage.py", "check"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2
        _one_line(result, "CREDVAULT_KEY_MANAGER must be local, aws-kms or pkcs11")

    def test_a_key_id_the_kms_does_not_know(self, tmp_path, moto_kms):
        result = _check(
            tmp_path,
            **moto_kms.env,
            CREDVAULT_KEY_MANAGER="aws-kms",
            CREDVAULT_KMS_KEY_ID="alias/no-such-key",
        )
        _one_line(result, "credvault.E031", "NotFoundException")

    def test_an_unreachable_kms(self, tmp_path, moto_kms):
        env = {**moto_kms.env, "AWS_ENDPOINT_URL_KMS": "http://127.0.0.1:9"}
        result = _check(
            tmp_path, **env, CREDVAULT_KEY_MANAGER="aws-kms", CREDVAULT_KMS_KEY_ID=MOTO_KMS_ALIAS
        )
        _one_line(result, "credvault.E030")

    def _pkcs11(self, softhsm, **overrides: str) -> dict[str, str]:
        return {
            **softhsm.env,
            "CREDVAULT_KEY_MANAGER": "pkcs11",
            "CREDVAULT_PKCS11_MODULE": str(softhsm.module),
            "CREDVAULT_PKCS11_TOKEN_LABEL": softhsm.token_label,
            "CREDVAULT_PKCS11_PIN_FILE": str(softhsm.pin_file),
            "CREDVAULT_PKCS11_KEY_LABEL": SOFTHSM_KEY_LABEL,
            **overrides,
        }

    def test_the_hsm_opens_the_canary(self, tmp_path, softhsm):
        result = _check(tmp_path, **self._pkcs11(softhsm))
        assert result.returncode == 0, result.stderr

    def test_a_wrong_pin(self, tmp_path, softhsm):
        wrong = str(softhsm.wrong_pin_file())
        result = _check(tmp_path, **self._pkcs11(softhsm, CREDVAULT_PKCS11_PIN_FILE=wrong))
        _one_line(result, "credvault.E031", "PIN")
        assert softhsm.pin not in result.stderr + result.stdout

    def test_an_unreadable_pin_file(self, tmp_path, softhsm):
        missing = str(tmp_path / "no-pin")
        result = _check(tmp_path, **self._pkcs11(softhsm, CREDVAULT_PKCS11_PIN_FILE=missing))
        _one_line(result, "credvault.E029", "cannot be read")

    def test_a_module_that_does_not_load(self, tmp_path, softhsm):
        bogus = tmp_path / "libnothing.so"
        bogus.write_text("not a library")
        result = _check(tmp_path, **self._pkcs11(softhsm, CREDVAULT_PKCS11_MODULE=str(bogus)))
        _one_line(result, "credvault.E031", "does not load")


class TestRotation:
    """`rotate_keys` under a key manager: a new KMS key or a new HSM key label wraps every data
    key, one key-manager call per data key (AWS KMS's ReEncrypt; on the token, an unwrap into a
    session object and a wrap), and every value still opens."""

    @pytest.mark.parametrize("manager", ["aws-kms", "pkcs11"])
    def test_rotate_keys_moves_every_data_key_to_the_new_key(
        self, request, settings, monkeypatch, alice_api, bob_api, manager
    ):
        use_key_manager(request, settings, monkeypatch, manager)
        secrets_ = {}
        for api, name in ((alice_api, "alice"), (bob_api, "bob")):
            secrets_[name] = marked(name)
            assert api.store("github", creds(api_key=secrets_[name])).status_code == 201
        old = managers.key_manager().current()
        if manager == "aws-kms":
            kms = request.getfixturevalue("moto_kms")
            settings.CREDVAULT_KMS_KEY_ID = kms.create_key()
        else:
            hsm = request.getfixturevalue("softhsm")
            label = f"credvault-kek-{secrets.token_hex(4)}"
            hsm.generate_key(label)
            settings.CREDVAULT_PKCS11_KEY_LABEL = label
        managers._built.cache_clear()
        new = managers.key_manager().current()
        assert new != old
        assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {old}

        out = StringIO()
        call_command("rotate_keys", stdout=out)
        # One call a key (KMS's ReEncrypt; on the token, unwrap and wrap in one session call).
        assert out.getvalue().splitlines()[-1] == (
            f"done: 2 data key(s) rewrapped under {new}, 2 key-manager call(s)"
        )
        assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {new}
        data_keys.cache.clear()
        for service in ConnectedService.objects.all():
            assert opened_set(service) == {"api_key": secrets_[service.account.name]}
