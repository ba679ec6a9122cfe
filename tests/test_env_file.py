"""The `.env` that `make run` writes (scripts/write_env.py): fresh secrets, the audit key among
them, mode 0600, never overwritten; a file of an earlier version, without CREDVAULT_AUDIT_KEYS,
gets one appended and keeps every line it had."""

from __future__ import annotations

import stat

from scripts.write_env import main as write_env
from services.checkpoints import _parsed as parse_audit_keys
from services.crypto import KeyRing


def settings_of(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )


def test_a_new_file_holds_every_secret_and_is_private(tmp_path):
    path = tmp_path / ".env"
    assert write_env(str(path)) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    values = settings_of(path.read_text())
    assert len(values["SECRET_KEY"]) >= 50
    KeyRing.parse(values["CREDVAULT_ENCRYPTION_KEYS"])
    audit = parse_audit_keys(values["CREDVAULT_AUDIT_KEYS"])
    assert len(audit.keys[audit.signing_id]) == 32
    assert values["CREDVAULT_ENVIRONMENT"] == "local"


def test_an_existing_file_is_never_rewritten(tmp_path):
    path = tmp_path / ".env"
    write_env(str(path))
    before = path.read_text()
    assert write_env(str(path)) == 0
    assert path.read_text() == before


def test_a_file_without_the_audit_key_gets_one_appended(tmp_path):
    path = tmp_path / ".env"
    older = "SECRET_KEY=kept\nCREDVAULT_ENCRYPTION_KEYS=k1:kept"  # no final newline
    path.write_text(older)
    assert write_env(str(path)) == 0
    text = path.read_text()
    assert text.startswith(older + "\n")
    values = settings_of(text)
    assert values["SECRET_KEY"] == "kept"
    parse_audit_keys(values["CREDVAULT_AUDIT_KEYS"])
    assert write_env(str(path)) == 0
    assert path.read_text() == text
