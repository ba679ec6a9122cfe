"""Management commands as an operator runs them (`python manage.py ...`, a process of its own):

- Bad input (a bad option value, an unknown account, agent or prefix, a malformed
  CREDVAULT_EXTRA_CATALOG, a bad key setting) is answered with one line on standard error, a
  non-zero exit, no traceback and nothing on standard output. Once a shortened
  `verify_audit --expect` digest, or a catalog file that was not TOML, printed a 38-line
  traceback.
- Standard output holds the command's own output alone: `TOKEN=$(manage.py issue_token demo)`
  captures the token and nothing else. The audit JSON lines of the `credvault.audit` logger go
  to standard error.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_AUDIT_KEYS, TEST_KEYS
from tests.support.harness import BASE_DIR, Gunicorn, server_env

# slow: each test runs manage.py as a process of its own, some a gunicorn.
pytestmark = pytest.mark.slow

COMMAND_DIRS = (
    BASE_DIR / "services" / "management" / "commands",
    BASE_DIR / "providers" / "management" / "commands",
)
COMMANDS = sorted(
    path.stem for folder in COMMAND_DIRS for path in folder.glob("*.py") if path.stem != "__init__"
)

# Each command with arguments that parse and would succeed in the module's database (the
# account `acme` with the agent `bot`): a start-up error must stop it all the same.
VALID = {
    "bootstrap_demo": [],
    "check_webhooks": [],
    "checkpoint_audit": [],
    "create_account": ["other"],
    "create_agent": ["acme", "bot2"],
    "create_member": ["acme", "person@example.com"],
    "deactivate_account": ["acme"],
    "delete_account": ["acme", "--yes"],
    "deliver_webhooks": ["--once"],
    "expire_token": ["cvt_nothere1"],
    "generate_key": [],
    "issue_agent_token": ["acme", "bot"],
    "issue_token": ["acme"],
    "list_agent_tokens": ["acme"],
    "list_tokens": [],
    "reactivate_account": ["acme"],
    "migrate_key_manager": [],
    "migrate": ["--no-input"],
    "reencrypt": [],
    "remove_member": ["acme", "person@example.com"],
    "refresh_tokens": [],
    "render_provider_table": [],
    "revoke_token": ["cvt_nothere1"],
    "rotate_keys": [],
    "verify_audit": [],
}

# Each command's own bad input, and what its one line says.
BAD_INPUT = [
    ("bootstrap_demo", ["--base-url"], "expected one argument"),
    ("check_webhooks", ["extra"], "unrecognized arguments: extra"),
    ("checkpoint_audit", ["nobody"], "no account named 'nobody'"),
    ("create_account", ["a b/c"], "account name is 1 to 64 characters"),
    ("create_account", ["acme"], "account 'acme' exists already"),
    ("create_agent", ["acme", "bot", "--method", "FOO"], "invalid choice: 'FOO'"),
    ("create_agent", ["nobody", "bot"], "no account named 'nobody'"),
    ("create_agent", ["acme", "bot", "--path", "nope"], "--path 'nope'"),
    ("create_agent", ["acme", "bot", "--expires-at", "soon"], "argument --expires-at: 'soon'"),
    ("create_agent", ["acme", "bot", "--approve", "GO:/x"], "argument --approve: 'GO:/x'"),
    ("create_member", ["nobody", "a@example.com"], "no account named 'nobody'"),
    ("create_member", ["acme", "a@b"], "'a@b' is not an email address"),
    ("create_member", ["acme", "a@example.com", "--expires-in", "0"], "--expires-in takes"),
    ("create_member", ["acme", "a@example.com", "--expires-in", "x"], "invalid int value"),
    ("deactivate_account", ["nobody"], "no account named 'nobody'"),
    ("delete_account", ["nobody", "--yes"], "no account named 'nobody'"),
    ("delete_account", ["acme"], "deleting acme needs --yes"),
    ("deliver_webhooks", ["--threads", "0"], "--threads must be 1 or more"),
    ("deliver_webhooks", ["--poll", "x"], "argument --poll: invalid float"),
    ("expire_token", ["cvt_nothere1"], "no token with prefix 'cvt_nothere1'"),
    ("expire_token", ["cvt_nothere1", "--in-days", "x"], "argument --in-days: invalid int"),
    ("generate_key", ["extra"], "unrecognized arguments: extra"),
    ("issue_agent_token", ["acme", "ghost"], "no agent named 'ghost'"),
    ("issue_agent_token", ["acme", "bot", "--expires-in", "0"], "--expires-in takes"),
    ("issue_token", ["nobody"], "no account named 'nobody'"),
    ("issue_token", ["acme", "--expires-in", "x"], "argument --expires-in: invalid int"),
    ("issue_token", [], "the following arguments are required: account"),
    ("list_agent_tokens", ["nobody"], "no account named 'nobody'"),
    ("list_agent_tokens", ["acme", "bad/name"], "an agent name is"),
    ("list_agent_tokens", ["acme", "ghost"], "no agent named 'ghost' in acme"),
    ("list_tokens", ["nobody"], "no account named 'nobody'"),
    ("reactivate_account", ["nobody"], "no account named 'nobody'"),
    ("migrate_key_manager", ["--batch-size", "0"], "--batch-size must be at least 1"),
    ("migrate_key_manager", [], "CREDVAULT_KEY_MANAGER is local"),
    ("migrate", ["--nope"], "unrecognized arguments: --nope"),
    ("migrate", ["services", "9999"], "Cannot find a migration matching '9999'"),
    ("reencrypt", ["--batch-size", "0"], "--batch-size must be at least 1"),
    ("remove_member", ["nobody", "a@example.com"], "no account named 'nobody'"),
    ("remove_member", ["acme", "a@example.com"], "is not a member of the account acme"),
    ("refresh_tokens", ["--ahead", "x"], "argument --ahead: invalid int"),
    ("refresh_tokens", ["--ahead", "-1"], "--ahead must be 0 or more"),
    ("render_provider_table", ["--nope"], "unrecognized arguments: --nope"),
    ("revoke_token", ["cvt_nothere1"], "no token with prefix 'cvt_nothere1'"),
    ("revoke_token", ["xyz"], "no token with prefix 'xyz': a prefix is cvt_ or cva_"),
    ("rotate_keys", ["--batch-size", "0"], "--batch-size must be at least 1"),
    ("verify_audit", ["acme", "--expect", "41:9f2c"], "argument --expect: takes SEQ:DIGEST"),
    ("verify_audit", ["--expect", f"1:{'0' * 64}"], "--expect needs the account"),
    ("verify_audit", ["nobody"], "no account named 'nobody'"),
]

NOT_TOML = "[[providers]\nid = 'internal'\n"
# A well-formed entry but for its category.
INVALID_ENTRY = """
[[providers]]
id = "internal-billing"
name = "Internal billing"
category = "bookkeeping"
"""


def command_env(database: Path, **overrides: str) -> dict[str, str]:
    """This process's environment without credvault's settings, then a database and keys of
    the test's own; no `.env` is read."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CREDVAULT_", "DATABASE_URL", "CACHE_URL", "SECRET_KEY"))
    }
    env.update(
        {
            "CREDVAULT_ENV_FILE": "",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "CREDVAULT_ENCRYPTION_KEYS": TEST_KEYS,
            "CREDVAULT_AUDIT_KEYS": TEST_AUDIT_KEYS,
            "DATABASE_URL": f"sqlite:///{database}",
            "LOG_LEVEL": "INFO",
        }
    )
    env.update(overrides)
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def succeeded(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = manage(env, *args)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    """A migrated database with the account `acme` and its agent `bot`."""
    path = tmp_path_factory.mktemp("commands") / "commands.sqlite3"
    env = command_env(path)
    succeeded(env, "migrate", "-v", "0")
    succeeded(env, "create_account", "acme")
    succeeded(env, "create_agent", "acme", "bot", "--service", "github")
    return path


def assert_one_line_refusal(result: subprocess.CompletedProcess, message: str) -> str:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    return lines[0]


def test_every_command_has_bad_input_here():
    assert set(VALID) == set(COMMANDS)
    assert {command for command, _, _ in BAD_INPUT} == set(COMMANDS)


@pytest.mark.parametrize(("command", "args", "message"), BAD_INPUT)
def test_bad_input_is_one_line_and_a_non_zero_exit(database, command, args, message):
    assert_one_line_refusal(manage(command_env(database), command, *args), message)


def test_a_bad_argument_exits_2_without_the_usage(database):
    result = manage(command_env(database), "verify_audit", "acme", "--expect", "41:9f2c")
    line = assert_one_line_refusal(result, "SEQ:DIGEST")
    assert result.returncode == 2
    assert line.startswith("manage.py verify_audit: error: argument --expect: ")
    assert "64 lowercase hex characters" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_catalog_file_that_is_not_toml_stops_every_command_in_one_line(
    database, tmp_path, command
):
    extra = tmp_path / "extra.toml"
    extra.write_text(NOT_TOML)
    env = command_env(database, CREDVAULT_EXTRA_CATALOG=str(extra))
    line = assert_one_line_refusal(manage(env, command, *VALID[command]), "credvault.E017")
    assert f"CREDVAULT_EXTRA_CATALOG ({extra}): not valid TOML" in line


@pytest.mark.parametrize("command", ["issue_token", "generate_key", "render_provider_table"])
def test_an_invalid_catalog_entry_is_named_with_its_field_in_one_line(database, tmp_path, command):
    extra = tmp_path / "extra.toml"
    extra.write_text(INVALID_ENTRY)
    env = command_env(database, CREDVAULT_EXTRA_CATALOG=str(extra))
    line = assert_one_line_refusal(manage(env, command, *VALID[command]), "credvault.E017")
    assert "provider 'internal-billing': `category`" in line


def test_a_missing_catalog_file_is_one_line(database, tmp_path):
    env = command_env(database, CREDVAULT_EXTRA_CATALOG=str(tmp_path / "absent.toml"))
    line = assert_one_line_refusal(manage(env, "list_tokens"), "credvault.E017")
    assert "cannot read" in line


@pytest.mark.parametrize(
    ("command", "setting", "message"),
    [
        ("issue_token", "CREDVAULT_ENCRYPTION_KEYS", "credvault.E002"),
        ("list_tokens", "CREDVAULT_ENCRYPTION_KEYS", "credvault.E002"),
        ("checkpoint_audit", "CREDVAULT_AUDIT_KEYS", "credvault.E010"),
        ("verify_audit", "CREDVAULT_AUDIT_KEYS", "credvault.E010"),
        ("reencrypt", "CREDVAULT_ENCRYPTION_KEYS", "credvault.E002"),
        ("rotate_keys", "CREDVAULT_ENCRYPTION_KEYS", "credvault.E002"),
    ],
)
def test_a_bad_key_setting_is_one_line(database, command, setting, message):
    marked = f"k1:{secrets.token_hex(8)}"
    env = command_env(database, **{setting: marked})
    line = assert_one_line_refusal(manage(env, command, *VALID[command]), message)
    assert setting in line
    assert marked.split(":")[1] not in line
    # The hint names the command as it is run here, in a checkout.
    assert "`python manage.py generate_key` prints one" in line


def test_several_failing_checks_share_the_one_line(database):
    env = command_env(database, SECRET_KEY="", CREDVAULT_ENCRYPTION_KEYS="bad")
    line = assert_one_line_refusal(manage(env, "issue_token", "acme"), "credvault.E001")
    assert "credvault.E002" in line


def test_a_bad_catalog_still_stops_the_server_at_start_up(database, tmp_path):
    extra = tmp_path / "extra.toml"
    extra.write_text(NOT_TOML)
    log = tmp_path / "gunicorn.log"
    env = server_env(f"sqlite:///{database}", CREDVAULT_EXTRA_CATALOG=str(extra))
    server = Gunicorn(env, workers=1, log=log)
    with pytest.raises(RuntimeError, match="exited early"):
        server.start()
    assert f"CREDVAULT_EXTRA_CATALOG ({extra}): not valid TOML" in log.read_text()


TOKEN = r"cv[ta]_[0-9A-Za-z]{46}"


def audit_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "credvault.audit" in line]


def test_stdout_holds_the_commands_own_output_alone(database):
    env = command_env(database)
    created = succeeded(env, "create_account", "beta")
    assert created.stdout == "created account beta\n"

    issued = succeeded(env, "issue_token", "beta", "--name", "ci")
    assert re.fullmatch(rf"{TOKEN}\n", issued.stdout)
    token = issued.stdout.strip()
    # The event went to the audit log, on standard error, with the prefix only.
    [event] = audit_lines(issued.stderr)
    assert '"action":"tokens.issue"' in event
    assert f'"target":"{token[:12]}"' in event
    assert token not in issued.stderr

    agent = succeeded(env, "create_agent", "beta", "bot", "--service", "github")
    assert agent.stdout == "created agent bot of beta: github (proxy, all methods, /)\n"
    assert audit_lines(agent.stderr)

    agent_issued = succeeded(env, "issue_agent_token", "beta", "bot")
    assert re.fullmatch(rf"{TOKEN}\n", agent_issued.stdout)
    agent_token = agent_issued.stdout.strip()
    assert audit_lines(agent_issued.stderr)
    assert agent_token not in agent_issued.stderr

    expired = succeeded(env, "expire_token", agent_token[:12], "--in-days", "3")
    assert re.fullmatch(
        rf"{agent_token[:12]} of beta expires \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n",
        expired.stdout,
    )
    revoked = succeeded(env, "revoke_token", token)
    assert revoked.stdout == f"revoked {token[:12]} of beta\n"
    assert token not in revoked.stdout + revoked.stderr
    assert succeeded(env, "deactivate_account", "beta").stdout == "beta is deactivated\n"
    assert succeeded(env, "reactivate_account", "beta").stdout == "beta is active\n"

    checkpoint = succeeded(env, "checkpoint_audit", "beta")
    assert re.fullmatch(r"account beta: checkpoint at \d+:[0-9a-f]{64}\n", checkpoint.stdout)
    assert '"type":"audit_checkpoint"' in checkpoint.stderr
    for result in (created, issued, agent, agent_issued, expired, revoked, checkpoint):
        assert "credvault.audit" not in result.stdout
        assert '"type":' not in result.stdout
