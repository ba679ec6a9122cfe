"""A bad setting is one line naming the setting and what it accepts, and exit status 2, never a
traceback: from `manage.py` and credvault-manage's `python -m credvault.manage`, from the check
that `make run` and the systemd unit run before gunicorn, from gunicorn's master before it
forks, from `make run`'s check of CREDVAULT_BIND. The table of docs/production.md is the
declaration's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from credvault import configuration
from services.rates import Rate, parse_rate
from tests.support.harness import BASE_DIR
from tests.support.helpers import manage

# Each test runs manage.py, gunicorn or make run's check as a process of its own.
pytestmark = pytest.mark.slow

NUMBERS = [
    setting.name
    for setting in configuration.SETTINGS
    if setting.parse in (configuration.whole_number, configuration.number)
]


def the_one_line(result: subprocess.CompletedProcess, name: str, *, status: int = 2) -> str:
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == status, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("credvault: ")
    assert name in line
    return line


def test_every_number_is_declared():
    assert len(NUMBERS) >= 13
    assert "CREDVAULT_PROXY_MAX_BODY" in NUMBERS


@pytest.mark.parametrize("name", NUMBERS)
def test_a_number_that_is_not_one_is_one_line(name):
    line = the_one_line(manage("check", **{name: "lots"}), name)
    assert configuration.BY_NAME[name].accepts in line


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "nonsense://x/y"),
        ("DATABASE_URL", "postgres://user:hunter2secret@db.example:port/credvault"),
        ("CACHE_URL", "memcached-ish://x"),
        ("LOG_LEVEL", "LOUD"),
        ("DEBUG", "maybe"),
        ("CREDVAULT_PROVIDER_BASE_URLS", "[1"),
        ("CREDVAULT_OUTBOUND_ALLOWED_HOSTS", "http://x/"),
    ],
)
def test_a_malformed_value_is_one_line(name, value):
    line = the_one_line(manage("check", **{name: value}), name)
    assert configuration.BY_NAME[name].accepts in line
    assert "hunter2secret" not in line


def test_a_range_is_one_line_with_its_check_id():
    line = the_one_line(manage("check", CREDVAULT_OAUTH_TIMEOUT="61"), "CREDVAULT_OAUTH_TIMEOUT")
    assert "above 0 and at most 60" in line
    assert "credvault.E020" in line


def test_an_unknown_provider_id_in_the_base_urls_is_one_line():
    result = manage(
        "check", CREDVAULT_PROVIDER_BASE_URLS='{"no-such-provider": "https://x.example"}'
    )
    line = the_one_line(result, "CREDVAULT_PROVIDER_BASE_URLS['no-such-provider']")
    assert "names no provider of the catalog" in line
    assert "credvault.E003" in line


def test_an_env_file_that_does_not_exist_is_one_line(tmp_path):
    missing = tmp_path / "credvault.env"
    line = the_one_line(manage("check", CREDVAULT_ENV_FILE=str(missing)), "CREDVAULT_ENV_FILE")
    assert str(missing) in line


def test_a_database_that_cannot_be_reached_is_one_line(tmp_path):
    unreachable = f"sqlite:///{tmp_path / 'no-such-directory' / 'credvault.sqlite3'}"
    result = manage("migrate", "--no-input", DATABASE_URL=unreachable)
    line = the_one_line(result, "cannot reach the database (DATABASE_URL)", status=1)
    assert "unable to open database file" in line


def test_gunicorn_stops_once_with_the_one_line_before_forking():
    env = {**os.environ, "CREDVAULT_PROXY_TIMEOUT": "soon", "CREDVAULT_BIND": "127.0.0.1:1"}
    result = subprocess.run(
        [
            str(BASE_DIR / ".venv" / "bin" / "gunicorn"),
            "-c",
            "gunicorn.conf.py",
            "credvault.wsgi:application",
        ],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    line = the_one_line(result, "CREDVAULT_PROXY_TIMEOUT")
    assert "a number, above 0 and at most 300" in line


@pytest.mark.parametrize("bind", ["127.0.0.1:70000", "127.0.0.1:0", "127.0.0.1", "localhost:http"])
def test_make_runs_bind_out_of_range_is_one_line(bind):
    result = subprocess.run(
        [sys.executable, "scripts/check_bind.py"],
        cwd=BASE_DIR,
        env={**os.environ, "CREDVAULT_BIND": bind},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    line = the_one_line(result, f"CREDVAULT_BIND={bind!r}")
    assert "a port from 1 to 65535" in line


def test_a_number_set_empty_takes_its_default():
    values = configuration.read({"CREDVAULT_PROXY_MAX_BODY": " ", "WEB_CONCURRENCY": ""})
    assert values["CREDVAULT_PROXY_MAX_BODY"] == 1024 * 1024
    assert values["WEB_CONCURRENCY"] is None


RATES = [setting.name for setting in configuration.SETTINGS if setting.parse is parse_rate]


def test_the_rates_load_typed():
    assert RATES == [
        "CREDVAULT_RATE_LIMIT",
        "CREDVAULT_TEST_RATE_LIMIT",
        "CREDVAULT_PROXY_RATE_LIMIT",
    ]
    values = configuration.read({"CREDVAULT_PROXY_RATE_LIMIT": "5/hour"})
    assert values["CREDVAULT_PROXY_RATE_LIMIT"] == Rate(requests=5, seconds=3600)
    assert values["CREDVAULT_RATE_LIMIT"] == Rate(requests=600, seconds=60)


def check_settings(**env: str) -> subprocess.CompletedProcess:
    """`python -m credvault.configuration --check`: what `make run` and the systemd unit run
    before gunicorn starts."""
    return subprocess.run(
        [sys.executable, "-m", "credvault.configuration", "--check"],
        cwd=BASE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", RATES)
def test_a_malformed_rate_stops_the_start_in_one_line(name):
    """Before gunicorn forks, as every other setting: not at a request's throttle."""
    line = the_one_line(check_settings(**{name: "lots"}), name)
    assert configuration.BY_NAME[name].accepts in line
    assert "credvault.E004" in line


def test_a_malformed_rate_is_one_line_from_manage_py():
    line = the_one_line(
        manage("check", CREDVAULT_TEST_RATE_LIMIT="0/min"), "CREDVAULT_TEST_RATE_LIMIT"
    )
    assert "a rate such as 30/min (credvault.E004)" in line


def test_the_settings_check_before_gunicorn_is_one_line_for_web_concurrency():
    """gunicorn reads WEB_CONCURRENCY with int() as it imports its own configuration, before
    gunicorn.conf.py: the check that runs first is what makes it one line."""
    line = the_one_line(check_settings(WEB_CONCURRENCY="x"), "WEB_CONCURRENCY")
    assert "a whole number, at least 1 worker" in line
    ok = check_settings()
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")


@pytest.mark.parametrize(
    "command", [["migrate", "--no-input"], ["bootstrap_demo"], ["refresh_tokens"]]
)
def test_a_database_that_cannot_be_reached_is_one_line_from_each_command(tmp_path, command):
    unreachable = f"sqlite:///{tmp_path / 'no-such-directory' / 'credvault.sqlite3'}"
    result = manage(*command, DATABASE_URL=unreachable)
    the_one_line(result, "cannot reach the database (DATABASE_URL)", status=1)


def test_the_installed_entry_is_manage_pys(tmp_path):
    """credvault-manage runs `python -m credvault.manage`: the same one-line errors as manage.py,
    a bad setting's and an unreachable database's."""

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "credvault.manage", *args],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(BASE_DIR), **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    line = the_one_line(
        run("check", CREDVAULT_PROXY_RATE_LIMIT="lots"), "CREDVAULT_PROXY_RATE_LIMIT"
    )
    assert "credvault.E004" in line
    unreachable = f"sqlite:///{tmp_path / 'no-such-directory' / 'credvault.sqlite3'}"
    result = run("migrate", "--no-input", DATABASE_URL=unreachable)
    the_one_line(result, "cannot reach the database (DATABASE_URL)", status=1)
    assert run("check").returncode == 0
