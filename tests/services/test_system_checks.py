"""The system checks: a misconfigured start stops at `manage.py check` with a clear
message that holds no key, and a production configuration passes `check --deploy`."""

from __future__ import annotations

import secrets

import pytest

from tests.conftest import KEY_B, TEST_AUDIT_KEYS, TEST_KEYS
from tests.support.helpers import manage

# slow: most tests run `manage.py check` as a process of its own.
pytestmark = pytest.mark.slow


class TestSystemChecks:
    """A misconfigured start stops at `manage.py check` with a clear message."""

    def test_an_sqlite_without_returning_fails_check(self, monkeypatch):
        from django.db import connection

        from services.storage import checks, dialects

        if connection.vendor != "sqlite":
            pytest.skip("a check of the SQLite library")
        assert checks.check_database_version(None) == []
        monkeypatch.setattr(dialects.sqlite3, "sqlite_version_info", (3, 34, 1))
        [error] = checks.check_database_version(None)
        assert error.id == "credvault.E007"
        assert "3.35" in error.msg

    @pytest.mark.parametrize(
        ("env", "check_id", "words"),
        [
            ({"SECRET_KEY": ""}, "credvault.E001", "SECRET_KEY is not set"),
            ({"CREDVAULT_ENCRYPTION_KEYS": ""}, "credvault.E002", "not set"),
            ({"CREDVAULT_ENCRYPTION_KEYS": "k1:bm90LWJhc2U2NA"}, "credvault.E002", "base64"),
            ({"CREDVAULT_ENCRYPTION_KEYS": "k1:c2hvcnQ="}, "credvault.E002", "32"),
            (
                {"CREDVAULT_ENCRYPTION_KEYS": f"k1:{KEY_B},k1:{KEY_B}"},
                "credvault.E002",
                "duplicate",
            ),
            ({"CREDVAULT_PROVIDER_BASE_URLS": "[1"}, "credvault.E003", "JSON"),
            (
                {"CREDVAULT_PROVIDER_BASE_URLS": '{"github": "ftp://x"}'},
                "credvault.E003",
                "http(s) URL",
            ),
            ({"CREDVAULT_RATE_LIMIT": "lots"}, "credvault.E004", "rate"),
            ({"CREDVAULT_AUDIT_KEYS": ""}, "credvault.E010", "CREDVAULT_AUDIT_KEYS is not set"),
            ({"CREDVAULT_AUDIT_KEYS": "a1:c2hvcnQ="}, "credvault.E010", "32"),
            ({"CREDVAULT_AUDIT_CHECKPOINT_SECONDS": "-1"}, "credvault.E011", "0 (every event)"),
            (
                {"CREDVAULT_OUTBOUND_ALLOWED_HOSTS": "stand-in.internal, http://x/"},
                "credvault.E023",
                "'http://x/' is not a host or host:port",
            ),
            (
                {"CREDVAULT_WEBHOOK_ALLOWED_HOSTS": "receiver.internal, http://x/"},
                "credvault.E026",
                "'http://x/' is not a host or host:port",
            ),
            ({"CREDVAULT_APPROVAL_TTL": "59"}, "credvault.E025", "CREDVAULT_APPROVAL_TTL must be"),
            (
                {"CREDVAULT_APPROVAL_MAX_WAIT": "601"},
                "credvault.E027",
                "CREDVAULT_APPROVAL_MAX_WAIT",
            ),
            (
                {"CREDVAULT_MCP_MAX_RESULT": "0"},
                "credvault.E019",
                "CREDVAULT_MCP_MAX_RESULT must be at least 1 byte",
            ),
        ],
    )
    def test_bad_configuration_fails_check(self, env, check_id, words):
        result = manage("check", **env)
        assert result.returncode != 0
        assert check_id in result.stderr
        assert words in result.stderr
        assert KEY_B not in result.stderr

    PRODUCTION = {
        "CREDVAULT_ENV_FILE": "",  # docs/production.md: the local .env is not read
        # Nor is what this test process copied into its environment from that .env.
        "CREDVAULT_ENVIRONMENT": None,
        "CREDVAULT_ENCRYPTION_KEYS": TEST_KEYS,
        "CREDVAULT_AUDIT_KEYS": TEST_AUDIT_KEYS,
        "DEBUG": "false",
        "SECURE_SSL_REDIRECT": "true",
        "ALLOWED_HOSTS": "vault.example.com",
    }

    def test_deploy_check_passes_in_a_production_configuration(self):
        result = manage(
            "check",
            "--deploy",
            "--fail-level",
            "WARNING",
            SECRET_KEY=secrets.token_urlsafe(50),
            **self.PRODUCTION,
        )
        assert result.returncode == 0, result.stderr

    def test_deploy_check_fails_on_the_local_env_file(self, tmp_path):
        """A host where `make run` once ran: the production settings are in the environment,
        but the generated .env is still read. The deploy check fails, loudly."""
        from scripts.write_env import main as write_env

        local = tmp_path / ".env"
        assert write_env(str(local)) == 0
        result = manage(
            "check",
            "--deploy",
            SECRET_KEY=secrets.token_urlsafe(50),
            **{**self.PRODUCTION, "CREDVAULT_ENV_FILE": str(local)},
        )
        assert result.returncode != 0
        assert "credvault.E009" in result.stderr
        assert "CREDVAULT_ENV_FILE" in result.stderr

    def test_environment_provider_base_urls_are_read(self):
        result = manage(
            "shell",
            "-v",
            "0",
            "-c",
            "from providers.bases import base_url_for; from providers.catalog import get; "
            "print(base_url_for(get('github')), base_url_for(get('gitlab')))",
            CREDVAULT_PROVIDER_BASE_URLS='{"github": "https://ghe.example.com/api/v3"}',
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["https://ghe.example.com/api/v3", "https://gitlab.com"]


def test_each_check_id_names_one_check_and_the_docs_list_it():
    """An id stands in one place of the code (a loop over like settings counts once), and the
    table of ids in docs/production.md ("Configuration") has each, and no other."""
    import re

    from tests.support.harness import BASE_DIR

    sources = [
        BASE_DIR / "credvault" / "configuration.py",
        BASE_DIR / "services" / "checks.py",
        BASE_DIR / "services" / "storage" / "checks.py",
        BASE_DIR / "providers" / "checks.py",
        # The canary's ids, named by the cause the check reports.
        BASE_DIR / "services" / "keys" / "canary.py",
    ]
    ids = [
        found
        for path in sources
        for found in re.findall(
            r'(?:id=|[A-Z_]+ = )"(credvault\.[EW]\d{3})"', path.read_text(encoding="utf-8")
        )
    ]
    assert len(ids) == len(set(ids)), sorted(ids)
    document = (BASE_DIR / "docs" / "production.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(credvault\.[EW]\d{3})` \|", document, re.M)
    assert sorted(listed) == sorted(ids)
