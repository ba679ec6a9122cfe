"""The key managers' test processes answer as the real ones do (tests/support/key_managers.py):
moto's KMS encrypts and decrypts under an encryption context and refuses another, a stopped
KMS refuses connections, and a SoftHSM2 token wraps and unwraps a data key with its key and
refuses a wrong PIN."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pkcs11
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass
from pkcs11.exceptions import PinIncorrect, UserAlreadyLoggedIn

from tests.support.key_managers import (
    MOTO_KMS_ALIAS,
    SOFTHSM_KEY_LABEL,
    MotoKms,
    SoftHsm,
    require_moto_server,
)

CONTEXT = {"credvault:account": "alice", "credvault:service": "github"}
# One attempt and short timeouts: an outage shows at once.
NO_RETRY = {"connect_timeout": 1, "read_timeout": 1, "retries": {"total_max_attempts": 1}}


def kms_client(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, **config) -> object:
    """A boto3 KMS client configured only by the fixture's environment, as the aws-kms key
    manager is (a new session: the default one may have resolved credentials already)."""
    from botocore.config import Config

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return boto3.session.Session().client("kms", config=Config(**config))


def test_kms_decrypts_under_the_encryption_context_it_encrypted_with(moto_kms, monkeypatch):
    kms = kms_client(moto_kms.env, monkeypatch)
    plaintext = secrets.token_bytes(32)

    sealed = kms.encrypt(KeyId=MOTO_KMS_ALIAS, Plaintext=plaintext, EncryptionContext=CONTEXT)

    assert plaintext not in sealed["CiphertextBlob"]
    opened = kms.decrypt(CiphertextBlob=sealed["CiphertextBlob"], EncryptionContext=CONTEXT)
    assert opened["Plaintext"] == plaintext
    assert opened["KeyId"] == moto_kms.aliases[MOTO_KMS_ALIAS]


def test_kms_refuses_another_encryption_context(moto_kms, monkeypatch):
    kms = kms_client(moto_kms.env, monkeypatch)
    sealed = kms.encrypt(KeyId=MOTO_KMS_ALIAS, Plaintext=b"k" * 32, EncryptionContext=CONTEXT)

    with pytest.raises(ClientError) as refused:
        kms.decrypt(
            CiphertextBlob=sealed["CiphertextBlob"],
            EncryptionContext={**CONTEXT, "credvault:account": "bob"},
        )
    assert refused.value.response["Error"]["Code"] == "InvalidCiphertextException"


@pytest.fixture
def own_kms() -> Iterator[MotoKms]:
    """A KMS of this test alone, to stop."""
    require_moto_server()
    kms = MotoKms().start()
    yield kms
    kms.close()


def test_a_stopped_kms_refuses_the_connection(own_kms, monkeypatch):
    arn = own_kms.create_key()
    kms = kms_client(own_kms.env, monkeypatch, **NO_RETRY)
    assert kms.describe_key(KeyId=arn)["KeyMetadata"]["Arn"] == arn

    own_kms.stop()

    with pytest.raises(EndpointConnectionError):
        kms.describe_key(KeyId=arn)


@pytest.mark.slow  # waits out a read timeout of a second
def test_a_paused_kms_leaves_the_call_hanging_until_it_resumes(own_kms, monkeypatch):
    arn = own_kms.create_key()
    kms = kms_client(own_kms.env, monkeypatch, **NO_RETRY)

    own_kms.pause()
    with pytest.raises(ReadTimeoutError):
        kms.describe_key(KeyId=arn)
    own_kms.resume()

    assert kms.describe_key(KeyId=arn)["KeyMetadata"]["Arn"] == arn


def open_session(hsm: SoftHsm, pin: str) -> pkcs11.Session:
    """A read-write session on the token, logged in with `pin`. The login is the process's:
    a later session is logged in already (UserAlreadyLoggedIn) while another is open."""
    token = pkcs11.lib(str(hsm.module)).get_token(token_label=hsm.token_label)
    try:
        return token.open(rw=True, user_pin=pin)
    except UserAlreadyLoggedIn:
        return token.open(rw=True)


def test_softhsm_wraps_and_unwraps_a_data_key(softhsm):
    data_key = secrets.token_bytes(32)
    with open_session(softhsm, softhsm.pin_file.read_text(encoding="utf-8")) as session:
        kek = session.get_key(object_class=ObjectClass.SECRET_KEY, label=SOFTHSM_KEY_LABEL)
        plain = session.create_object(
            {
                Attribute.CLASS: ObjectClass.SECRET_KEY,
                Attribute.KEY_TYPE: KeyType.AES,
                Attribute.VALUE: data_key,
                Attribute.TOKEN: False,
                Attribute.EXTRACTABLE: True,
                Attribute.SENSITIVE: False,
            }
        )

        wrapped = kek.wrap_key(plain, mechanism=Mechanism.AES_KEY_WRAP_PAD)
        unwrapped = kek.unwrap_key(
            ObjectClass.SECRET_KEY,
            KeyType.AES,
            wrapped,
            mechanism=Mechanism.AES_KEY_WRAP_PAD,
            template={Attribute.SENSITIVE: False, Attribute.EXTRACTABLE: True},
        )

        assert data_key not in wrapped
        assert len(wrapped) == 40  # 32 bytes and the 8 of the wrap's integrity check
        assert unwrapped[Attribute.VALUE] == data_key


def test_softhsm_keeps_a_second_key_beside_the_first(softhsm):
    label = f"credvault-kek-{secrets.token_hex(4)}"
    softhsm.generate_key(label)

    with open_session(softhsm, softhsm.pin_file.read_text(encoding="utf-8")) as session:
        first = session.get_key(object_class=ObjectClass.SECRET_KEY, label=SOFTHSM_KEY_LABEL)
        second = session.get_key(object_class=ObjectClass.SECRET_KEY, label=label)
        data_key = session.create_object(
            {
                Attribute.CLASS: ObjectClass.SECRET_KEY,
                Attribute.KEY_TYPE: KeyType.AES,
                Attribute.VALUE: secrets.token_bytes(32),
                Attribute.TOKEN: False,
                Attribute.EXTRACTABLE: True,
                Attribute.SENSITIVE: False,
            }
        )
        by_first = first.wrap_key(data_key, mechanism=Mechanism.AES_KEY_WRAP_PAD)
        by_second = second.wrap_key(data_key, mechanism=Mechanism.AES_KEY_WRAP_PAD)

    assert by_first != by_second


# Logs in with the PIN of the file argv[3] in a process of its own, and prints what happened:
# "opened", or the name of the exception. A login is the process's, so in the test process a
# wrong PIN would meet UserAlreadyLoggedIn while any session there is logged in.
LOG_IN = """
import sys
from pathlib import Path

import pkcs11

module, token_label, pin_file = sys.argv[1:]
token = pkcs11.lib(module).get_token(token_label=token_label)
try:
    token.open(user_pin=Path(pin_file).read_text(encoding="utf-8")).close()
except pkcs11.exceptions.PKCS11Error as error:
    print(type(error).__name__)
else:
    print("opened")
"""


def log_in(hsm: SoftHsm, pin_file: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", LOG_IN, str(hsm.module), hsm.token_label, str(pin_file)],
        env={**os.environ, **hsm.env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_softhsm_refuses_a_wrong_pin(softhsm):
    wrong = softhsm.wrong_pin_file()
    assert wrong.stat().st_mode & 0o777 == 0o600
    assert softhsm.pin_file.stat().st_mode & 0o777 == 0o600

    assert log_in(softhsm, wrong) == PinIncorrect.__name__
    assert log_in(softhsm, softhsm.pin_file) == "opened"
