"""The key managers of the tests, as real processes on this machine (no mocks): AWS KMS is moto's
server (`moto_server`, from the `dev` extra) on a free loopback port, and PKCS#11 is a token of
Debian's SoftHSM2 (`softhsm2-util` and its module) in a temporary directory of its own.

- `MotoKms`: its `env` is what boto3 needs to reach it (fake credentials "testing", region
  us-east-1); `create_key` makes a symmetric key (and its alias); `stop` kills the server, so
  that a call is refused as in an outage, `pause` and `resume` freeze and thaw it, so that a
  call hangs. moto keeps its keys in memory: a stopped server has lost them, so a test that
  stops one starts its own.
- `SoftHsm`: a token with a user PIN in a file (mode 0600); `generate_key` makes a token AES-256
  key that wraps and unwraps. SoftHSM reads SOFTHSM2_CONF once, when its library is initialised
  in a process, and python-pkcs11 loads a library once per process: in-process use needs
  SOFTHSM2_CONF (`env`) set in os.environ before the first `pkcs11.lib(...)`, which the session
  fixture of tests/conftest.py does (one token per process, so one per xdist worker).

`require_moto_server` and `require_softhsm` skip a test, saying what to install, where one is
absent, or fail it where CI requires them (CREDVAULT_REQUIRE_KEY_MANAGERS=1, set by `.ci/run`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.support.harness import free_port

MOTO_SERVER = Path(sys.executable).with_name("moto_server")
SOFTHSM2_UTIL = "softhsm2-util"
SOFTHSM2_MODULE = Path("/usr/lib/softhsm/libsofthsm2.so")

# moto accepts any credentials; these are the ones its documentation uses.
FAKE_AWS_CREDENTIAL = "testing"
AWS_REGION = "us-east-1"

# What the session fixtures of tests/conftest.py make: a KMS key under this alias, and a token
# with this label holding a key with this label.
MOTO_KMS_ALIAS = "alias/credvault-test"
SOFTHSM_TOKEN_LABEL = "credvault-test"
SOFTHSM_KEY_LABEL = "credvault-kek"


def require_moto_server() -> None:
    """Skip the test when moto's server is not installed, or fail it where CI requires the key
    managers (`.ci/run` sets CREDVAULT_REQUIRE_KEY_MANAGERS=1)."""
    if not MOTO_SERVER.exists():
        _missing(
            f"moto's server is not installed ({MOTO_SERVER}): `pip install 'moto[server]'`, "
            "the `dev` extra, which `make setup` and `make test` install"
        )


def require_softhsm() -> None:
    """Skip the test when SoftHSM2 is not installed, or fail it where CI requires the key
    managers."""
    if shutil.which(SOFTHSM2_UTIL) is None or not SOFTHSM2_MODULE.exists():
        _missing(
            "SoftHSM2 is not installed (softhsm2-util and "
            f"{SOFTHSM2_MODULE}): `apt-get install softhsm2`, which `make test` runs as root"
        )


def _missing(message: str) -> NoReturn:
    if os.environ.get("CREDVAULT_REQUIRE_KEY_MANAGERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _marked(label: str) -> str:
    """A secret that is easy to search for in any output (as tests/support/helpers.py's
    `marked`, which needs Django)."""
    return f"MARKED-SECRET-{label}-{secrets.token_hex(8)}"


def _write_private(path: Path, text: str) -> Path:
    """`text` in a new file that only its owner can read (mode 0600 from its creation)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    return path


class MotoKms:
    """moto's KMS server on 127.0.0.1, a subprocess of the test process. Its request log is in
    its own temporary directory, shown when it fails to start."""

    START_SECONDS = 30.0
    START_ATTEMPTS = 3  # a free port can be taken before the server binds it

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="credvault-moto-"))
        self.log = self.directory / "moto_server.log"
        self.port = 0
        # The ARN of each key that `create_key` made under an alias.
        self.aliases: dict[str, str] = {}
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment with which boto3 (and so the aws-kms key manager) reaches this
        server."""
        return {
            "AWS_ENDPOINT_URL_KMS": self.url,
            "AWS_ACCESS_KEY_ID": FAKE_AWS_CREDENTIAL,
            "AWS_SECRET_ACCESS_KEY": FAKE_AWS_CREDENTIAL,
            "AWS_DEFAULT_REGION": AWS_REGION,
        }

    def start(self) -> MotoKms:
        """Start the server and return once it answers HTTP; a RuntimeError with the end of its
        log if it never does."""
        for _ in range(self.START_ATTEMPTS):
            self.port = free_port()
            with self.log.open("ab") as log:
                self._process = subprocess.Popen(
                    [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(self.port)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._wait_until_answering():
                return self
        tail = self.log.read_text(encoding="utf-8", errors="replace")[-1000:]
        self.close()
        raise RuntimeError(f"moto_server did not start on 127.0.0.1: {tail}")

    def _wait_until_answering(self) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + self.START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                    return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        self._kill()
        return False

    def client(self, **config: Any) -> Any:
        """A boto3 KMS client of this server; `config` goes to botocore's Config (timeouts,
        retries)."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "kms",
            endpoint_url=self.url,
            region_name=AWS_REGION,
            aws_access_key_id=FAKE_AWS_CREDENTIAL,
            aws_secret_access_key=FAKE_AWS_CREDENTIAL,
            config=Config(**config),
        )

    def create_key(self, alias: str | None = None) -> str:
        """A new symmetric encryption key (and `alias`, "alias/...", pointing at it): its ARN."""
        kms = self.client()
        metadata = kms.create_key(
            KeySpec="SYMMETRIC_DEFAULT",
            KeyUsage="ENCRYPT_DECRYPT",
            Description="credvault test key",
        )["KeyMetadata"]
        arn = str(metadata["Arn"])
        if alias is not None:
            kms.create_alias(AliasName=alias, TargetKeyId=metadata["KeyId"])
            self.aliases[alias] = arn
        return arn

    def _signal(self, signum: int) -> None:
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError("moto_server is not running")
        self._process.send_signal(signum)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections are still accepted, nothing is answered."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw a paused server (SIGCONT)."""
        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        """Kill the server (SIGKILL), paused or not: its port refuses connections, and its keys
        are gone."""
        self._signal(signal.SIGKILL)
        self._kill()

    def _kill(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()

    def close(self) -> None:
        """Kill the server if it runs and remove its directory."""
        self._kill()
        self._process = None
        shutil.rmtree(self.directory, ignore_errors=True)


# Run by `SoftHsm.generate_key` in a process of its own, with the token's SOFTHSM2_CONF: a key
# can be added to any token, whichever configuration this process's library was loaded with.
_GENERATE_KEY = """
import sys
from pathlib import Path

import pkcs11
from pkcs11 import KeyType, MechanismFlag

module, token_label, pin_file, label = sys.argv[1:]
token = pkcs11.lib(module).get_token(token_label=token_label)
with token.open(rw=True, user_pin=Path(pin_file).read_text(encoding="utf-8")) as session:
    session.generate_key(
        KeyType.AES,
        256,
        label=label,
        store=True,
        capabilities=MechanismFlag.WRAP
        | MechanismFlag.UNWRAP
        | MechanismFlag.ENCRYPT
        | MechanismFlag.DECRYPT,
    )
"""


class SoftHsm:
    """A SoftHSM2 token in a temporary directory: its own softhsm2.conf (`conf`, for
    SOFTHSM2_CONF), its tokens under `tokens/`, the user PIN (a marked secret) in `pin_file`
    (mode 0600). The SO PIN is never shown."""

    def __init__(self, *, token_label: str = SOFTHSM_TOKEN_LABEL) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="credvault-softhsm-"))
        self.module = SOFTHSM2_MODULE
        self.token_label = token_label
        self.conf = self.directory / "softhsm2.conf"
        tokens = self.directory / "tokens"
        tokens.mkdir()
        self.conf.write_text(
            f"directories.tokendir = {tokens}\nobjectstore.backend = file\nlog.level = ERROR\n",
            encoding="utf-8",
        )
        self.pin = _marked("softhsm-pin")
        self.pin_file = _write_private(self.directory / "pin", self.pin)
        so_pin = _marked("softhsm-so-pin")
        result = subprocess.run(
            [
                SOFTHSM2_UTIL,
                "--init-token",
                "--free",
                "--label",
                token_label,
                "--pin",
                self.pin,
                "--so-pin",
                so_pin,
            ],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).replace(self.pin, "***")
            output = output.replace(so_pin, "***").strip()[-500:]
            self.close()
            raise RuntimeError(f"softhsm2-util could not initialise the token: {output}")

    @property
    def env(self) -> dict[str, str]:
        """The environment with which SoftHSM's library finds this token."""
        return {"SOFTHSM2_CONF": str(self.conf)}

    def generate_key(self, label: str) -> None:
        """A token AES-256 key named `label` that can wrap, unwrap, encrypt and decrypt. A second
        label on the same token is a second key (a rotation's new key)."""
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                _GENERATE_KEY,
                str(self.module),
                self.token_label,
                str(self.pin_file),
                label,
            ],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            output = result.stderr.replace(self.pin, "***").strip()[-500:]
            raise RuntimeError(f"the key {label!r} could not be generated: {output}")

    def wrong_pin_file(self) -> Path:
        """A new PIN file (mode 0600) holding a PIN that is not the token's."""
        path = self.directory / f"wrong-pin-{secrets.token_hex(4)}"
        return _write_private(path, _marked("softhsm-wrong-pin"))

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
