"""The start-up self-check in gunicorn's workers: a worker unwraps the canary's data key and
wraps under the current key-encryption key before it serves; when the key manager refuses or
is unreachable, it logs one line naming the check's id and gunicorn stops."""

from __future__ import annotations

import pytest

from tests.support.harness import Gunicorn, manage, request, server_env
from tests.support.key_managers import MOTO_KMS_ALIAS

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path, moto_kms):
    """A migrated database of its own, its canary sealed under the local ring, and the
    environment of a server whose key manager is moto's KMS."""
    env = server_env(f"sqlite:///{tmp_path / 'db.sqlite3'}", CREDVAULT_ENV_FILE="")
    manage(env, "migrate", "--no-input")
    return {
        **env,
        **moto_kms.env,
        "CREDVAULT_KEY_MANAGER": "aws-kms",
        "CREDVAULT_KMS_KEY_ID": MOTO_KMS_ALIAS,
    }


def test_a_worker_serves_once_its_key_manager_answers(env, tmp_path):
    with Gunicorn(env, workers=1, log=tmp_path / "gunicorn.log") as server:
        status, _, _ = request("GET", f"{server.url}/readyz")
        assert status == 200


@pytest.mark.parametrize(
    ("overrides", "check_id"),
    [
        ({"CREDVAULT_KMS_KEY_ID": "alias/no-such-key"}, "credvault.E031"),
        ({"AWS_ENDPOINT_URL_KMS": "http://127.0.0.1:9"}, "credvault.E030"),
    ],
    ids=["unknown-key", "unreachable"],
)
def test_a_worker_whose_key_manager_fails_refuses_to_serve(env, tmp_path, overrides, check_id):
    log = tmp_path / "gunicorn.log"
    server = Gunicorn({**env, **overrides}, workers=1, log=log)
    with pytest.raises(RuntimeError, match="exited early"):
        server.start(timeout=60)
    text = log.read_text()
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if check_id in line]
    assert len(lines) == 1, text
    assert "this worker does not serve" in lines[0]
