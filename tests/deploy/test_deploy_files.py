"""The production files of `deploy/` and the "Production" section of docs/production.md,
checked as far as a machine can without deploying: the systemd unit, the nginx server block,
the environment file the section writes, and every management command the section names."""

from __future__ import annotations

import configparser
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys

import pytest
from django.core.management import get_commands

from tests.support.harness import BASE_DIR
from tests.support.helpers import management_commands

DEPLOY = BASE_DIR / "deploy"
UNIT = DEPLOY / "credvault.service"
WORKER_UNIT = DEPLOY / "credvault-webhooks.service"
NGINX = DEPLOY / "nginx.conf"
MANAGE = DEPLOY / "credvault-manage"
PRODUCTION_DOC = BASE_DIR / "docs" / "production.md"

# What the guide's environment file is written with (step 4), as a shell would expand it.
SHELL_VARIABLES = {
    "HOST": "vault.example.com",
    "DB_PASSWORD": secrets.token_urlsafe(32),
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ENCRYPTION_KEY": "k20261123-a1b2c3:" + "QUFB" * 10 + "QUE=",  # 32 bytes of "A"
    "AUDIT_KEY": "k20261123-d4e5f6:" + "QkJC" * 10 + "QkI=",  # 32 bytes of "B"
}
# Every setting production needs, in the file systemd reads (docs/production.md, step 4).
PRODUCTION_SETTINGS = {
    "DJANGO_SETTINGS_MODULE",
    "CREDVAULT_ENV_FILE",
    "SECRET_KEY",
    "CREDVAULT_ENCRYPTION_KEYS",
    "CREDVAULT_AUDIT_KEYS",
    "DEBUG",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "CACHE_URL",
    "SECURE_SSL_REDIRECT",
    "SECURE_PROXY_SSL_HEADER",
    "CREDVAULT_BIND",
    "WEB_CONCURRENCY",
}
# --- reading the production guide -----------------------------------------------------------


def production_section(markdown: str) -> str:
    match = re.search(r"^## Production\n(.*?)(?=^## )", markdown, re.MULTILINE | re.DOTALL)
    assert match, "docs/production.md has no '## Production' section followed by another section"
    return match.group(1)


def environment_file(markdown: str) -> tuple[str, dict[str, str]]:
    """The path and the settings of the file the section writes with `cat > PATH <<EOF`,
    expanded with SHELL_VARIABLES as the shell would."""
    match = re.search(r"cat > (\S+) <<EOF\n(.*?)^EOF$", markdown, re.MULTILINE | re.DOTALL)
    assert match, "the Production section writes no environment file with cat > PATH <<EOF"
    path, body = match.groups()
    undefined = set(re.findall(r"(?<!\\)\$(\w+)", body)) - SHELL_VARIABLES.keys()
    assert not undefined, f"the environment file uses shell variables never set: {undefined}"
    body = re.sub(r"(?<!\\)\$(\w+)", lambda m: SHELL_VARIABLES[m.group(1)], body)
    body = body.replace("\\$", "$")
    settings = {}
    for line in body.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not KEY=VALUE: {line!r}"
            settings[key] = "".join(shlex.split(value)) if value else ""
    return path, settings


@pytest.fixture(scope="module")
def production() -> str:
    return production_section(PRODUCTION_DOC.read_text(encoding="utf-8"))


# --- the systemd unit -----------------------------------------------------------------------


def unit_file(path=UNIT) -> configparser.ConfigParser:
    # systemd allows a key more than once (the last wins) and `%` has no special meaning here.
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    return parser


def test_the_unit_runs_gunicorn_with_the_checkouts_config_and_the_environment_file(production):
    unit = unit_file()
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    service = unit["Service"]
    exec_start = shlex.split(service["ExecStart"])
    assert exec_start[0].endswith("/venv/bin/gunicorn")
    config = exec_start[exec_start.index("-c") + 1]
    assert config.endswith("/src/gunicorn.conf.py")
    assert exec_start[-1] == "credvault.wsgi:application"
    # Not in the checkout: gunicorn puts its working directory first on sys.path.
    assert service["WorkingDirectory"].rstrip("/") != config.rsplit("/", 1)[0]
    env_path, _ = environment_file(production)
    assert service["EnvironmentFile"] == env_path
    assert service["User"] == "credvault"
    # The guide installs the code, the venv and the unit where the unit expects them.
    assert config in production
    assert f"python3 -m venv {exec_start[0].removesuffix('/bin/gunicorn')}\n" in production
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_the_unit_checks_every_setting_before_gunicorn_starts(production):
    """gunicorn reads WEB_CONCURRENCY with int() before gunicorn.conf.py runs: the unit's
    ExecStartPre makes a non-number there one line in the journal, not gunicorn's traceback."""
    service = unit_file()["Service"]
    check = shlex.split(service["ExecStartPre"])
    venv = shlex.split(service["ExecStart"])[0].removesuffix("/bin/gunicorn")
    assert check == [f"{venv}/bin/python", "-m", "credvault.configuration", "--check"]
    # The command as systemd runs it: the environment file alone, away from the checkout.
    _, settings = environment_file(production)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", **settings, "WEB_CONCURRENCY": "x"}
    result = subprocess.run(
        [sys.executable, *check[1:]],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line == "credvault: WEB_CONCURRENCY must be a whole number, at least 1 worker."
    del env["WEB_CONCURRENCY"]
    passes = subprocess.run(
        [sys.executable, *check[1:]], cwd=BASE_DIR, env=env, capture_output=True, check=False
    )
    assert passes.returncode == 0, passes.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("Restart", "on-failure"),
        ("CapabilityBoundingSet", ""),
    ],
)
def test_the_unit_is_hardened(option, value):
    assert unit_file()["Service"][option] == value


def systemd_problems(text: str, directory, name: str = "credvault.service") -> list[str]:
    """What `systemd-analyze verify` reports about a unit of this text: unknown options, bad
    values, bad sections. The user, the environment file and the other units it names need
    not exist on this machine, and are not reported."""
    copy = directory / name
    copy.write_text(text, encoding="utf-8")
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if name in line
        and not re.search(r"user|group|EnvironmentFile|No such file|not found", line, re.I)
    ]


def test_systemd_analyze_verifies_the_unit(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed: the unit was only parsed")
    # verify also checks that ExecStart's program exists: here, the gunicorn of this test
    # run's environment stands in for the venv's.
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    assert gunicorn, "gunicorn is not installed beside this Python"
    text = (
        UNIT.read_text(encoding="utf-8")
        .replace("/srv/credvault/venv/bin/gunicorn", gunicorn)
        .replace("/srv/credvault/venv/bin/python", sys.executable)
    )
    assert systemd_problems(text, tmp_path) == []
    # The same unit with a misspelled option is reported: the check can fail.
    broken = text.replace("ProtectSystem=strict", "ProtectSystm=strict")
    assert any("ProtectSystm" in line for line in systemd_problems(broken, tmp_path))


# --- the webhook worker's unit -----------------------------------------------------------------

# What differs between the two units: how each starts and what it runs.
ONLY_THE_SERVERS = {"Type", "NotifyAccess", "ExecStart", "ExecReload"}


def test_the_webhook_unit_runs_deliver_webhooks_from_the_servers_venv(production):
    server, worker = unit_file()["Service"], unit_file(WORKER_UNIT)["Service"]
    venv = shlex.split(server["ExecStart"])[0].removesuffix("/bin/gunicorn")
    assert shlex.split(worker["ExecStart"]) == [
        f"{venv}/bin/python",
        "-m",
        "credvault.manage",
        "deliver_webhooks",
    ]
    assert "deliver_webhooks" in get_commands()
    assert worker["Type"] == "exec"
    assert "NotifyAccess" not in worker
    env_path, _ = environment_file(production)
    assert worker["EnvironmentFile"] == env_path
    assert unit_file(WORKER_UNIT)["Install"]["WantedBy"] == "multi-user.target"


def test_the_webhook_unit_has_every_setting_and_hardening_of_the_servers():
    """User, environment file, working directory, the settings check, restarts and every
    hardening option: a line added to one unit and not the other fails here."""
    server, worker = unit_file()["Service"], unit_file(WORKER_UNIT)["Service"]
    shared = set(server) - ONLY_THE_SERVERS
    assert {key: worker.get(key) for key in shared} == {key: server[key] for key in shared}
    assert set(worker) <= set(server)


def test_the_guide_installs_enables_and_watches_the_webhook_unit(production):
    installed = f"/etc/systemd/system/{WORKER_UNIT.name}"
    assert f"install -m 0644 /srv/credvault/src/deploy/{WORKER_UNIT.name} {installed}" in (
        production
    )
    assert "systemctl enable --now credvault-webhooks\n" in production
    assert "systemctl status credvault-webhooks\n" in production
    assert "journalctl -u credvault-webhooks\n" in production
    # Upgrades restart it with the server.
    assert "systemctl restart credvault credvault-webhooks" in production


def test_the_operations_section_shows_the_webhook_backlog():
    text = PRODUCTION_DOC.read_text(encoding="utf-8")
    operations = re.search(r"^## Operations\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert operations, "docs/production.md has no '## Operations' section"
    assert "credvault-manage check_webhooks" in operations.group(1)
    assert "check_webhooks" in get_commands()


def test_systemd_analyze_verifies_the_webhook_unit(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed: the unit was only parsed")
    text = WORKER_UNIT.read_text(encoding="utf-8").replace(
        "/srv/credvault/venv/bin/python", sys.executable
    )
    assert systemd_problems(text, tmp_path, WORKER_UNIT.name) == []
    broken = text.replace("ProtectHome=yes", "ProtectHom=yes")
    problems = systemd_problems(broken, tmp_path, WORKER_UNIT.name)
    assert any("ProtectHom" in line for line in problems)


# --- the environment file and the management commands of the guide ----------------------------


def test_the_guides_environment_file_passes_the_deploy_check(production):
    path, settings = environment_file(production)
    assert path == "/etc/credvault/credvault.env"
    missing = PRODUCTION_SETTINGS - settings.keys()
    assert not missing, f"the environment file does not set {sorted(missing)}"
    assert settings["CREDVAULT_ENV_FILE"] == ""  # no .env is read
    # Set, it would hide a local .env from the deploy check (credvault.E009).
    assert "CREDVAULT_ENVIRONMENT" not in settings
    assert settings["SECURE_PROXY_SSL_HEADER"] == "true"
    assert settings["CREDVAULT_BIND"].startswith("127.0.0.1:")
    # Only the file, as systemd would give it: nothing of this test run's environment. The
    # checkout's own .env (written by `make`) exists and must not be read.
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", **settings}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (1 silenced)." in result.stdout


def test_every_management_command_of_the_production_section_exists(production):
    found = management_commands(production)
    names = {name for name, _ in found}
    # The section runs at least these; fewer means the parser stopped seeing them.
    assert {"generate_key", "migrate", "check", "create_account", "issue_token"} <= names
    known = get_commands()
    unknown = [(name, line) for name, line in found if name not in known]
    assert not unknown, f"commands that do not exist: {unknown}"


def test_an_unknown_command_in_a_document_would_be_found():
    markdown = (
        "```sh\ncredvault-manage migrate --no-input\n"
        "TOKEN=$(credvault-manage issue_tokens acme)\n"
        "install -m 0755 deploy/credvault-manage /usr/local/sbin/credvault-manage\n```\n"
        "Then run `.venv/bin/python manage.py reencrypt_all`, or any `django-admin COMMAND`.\n"
    )
    found = management_commands(markdown)
    assert [name for name, _ in found] == ["migrate", "issue_tokens", "reencrypt_all"]
    known = get_commands()
    assert [name for name, _ in found if name not in known] == ["issue_tokens", "reencrypt_all"]


def test_credvault_manage_reads_the_units_environment_file_and_drops_to_its_user():
    text = MANAGE.read_text(encoding="utf-8")
    service = unit_file()["Service"]
    assert f"${{CREDVAULT_MANAGE_ENV_FILE:-{service['EnvironmentFile']}}}" in text
    assert f"${{CREDVAULT_MANAGE_USER:-{service['User']}}}" in text
    assert 'exec runuser -u "$user" -- "$venv/bin/python" -m credvault.manage "$@"' in text
    assert os.access(MANAGE, os.X_OK), "deploy/credvault-manage is not executable"
    if shutil.which("sh") is not None:
        result = subprocess.run(["sh", "-n", str(MANAGE)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


# --- nginx ----------------------------------------------------------------------------------


def nginx_directives() -> dict[str, list[str]]:
    """Each directive of deploy/nginx.conf with every value it is given (comments dropped)."""
    text = re.sub(r"#.*", "", NGINX.read_text(encoding="utf-8"))
    directives: dict[str, list[str]] = {}
    for name, value in re.findall(r"^\s*([a-z_0-9]+)\s+([^;{]*?)\s*;", text, re.MULTILINE):
        directives.setdefault(name, []).append(value)
    return directives


def kibibytes(size: str) -> float:
    number, unit = re.fullmatch(r"(\d+)([kKmM]?)", size).groups()
    return int(number) * {"": 1 / 1024, "k": 1, "m": 1024}[unit.lower()]


def test_nginx_buffers_whole_requests_and_answers_in_memory(production):
    directives = nginx_directives()
    assert directives["proxy_request_buffering"] == ["on"]
    # Answers whole, but a brokered call's, which may be a stream: nginx obeys no X-Accel-*
    # header of an answer, so credvault's own X-Accel-Buffering cannot turn it off per answer.
    assert directives["proxy_buffering"] == ["on", "off"]
    # A little above credvault's own 64 KiB, and for brokered calls and the MCP server above
    # their 1 MiB: credvault's 413 is the one a client gets first.
    limit, proxy_limit, mcp_limit = directives["client_max_body_size"]
    assert 64 < kibibytes(limit) <= 128
    assert 1024 < kibibytes(proxy_limit) <= 1200
    assert 1024 < kibibytes(mcp_limit) <= 1200
    # Bodies hold credentials: kept in memory, never in nginx's temporary files.
    body_buffer, proxy_body_buffer, mcp_body_buffer = directives["client_body_buffer_size"]
    assert kibibytes(body_buffer) >= kibibytes(limit)
    assert kibibytes(proxy_body_buffer) >= kibibytes(proxy_limit)
    assert kibibytes(mcp_body_buffer) >= kibibytes(mcp_limit)
    assert directives["proxy_max_temp_file_size"] == ["0"]
    for timeout in ("client_body_timeout", "client_header_timeout", "proxy_read_timeout"):
        assert timeout in directives
    assert "X-Forwarded-Proto $scheme" in directives["proxy_set_header"]
    # nginx passes requests to where the guide's environment file makes gunicorn listen.
    _, settings = environment_file(production)
    assert f"127.0.0.1:{settings['CREDVAULT_BIND'].rsplit(':', 1)[1]}" in " ".join(
        directives["server"]
    )
    assert directives["ssl_certificate"]
    assert directives["ssl_certificate_key"]


def test_nginx_refusals_are_problem_details():
    text = NGINX.read_text(encoding="utf-8")
    bodies = re.findall(r"return (\d{3}) '(.*)';", text)
    assert {status for status, _ in bodies} == {"413", "503"}
    for status, body in bodies:
        problem = json.loads(body)
        assert problem["status"] == int(status)
        assert set(problem) == {"type", "title", "status", "detail", "code"}


def test_nginx_accepts_the_config(tmp_path):
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if nginx is None:
        pytest.skip("nginx is not installed (apt-get install nginx): `nginx -t` was not run")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate for `nginx -t`")
    cert, key = tmp_path / "credvault.crt", tmp_path / "credvault.key"
    subject = ["-subj", "/CN=vault.example.com", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject],
        capture_output=True,
        check=True,
        timeout=60,
    )
    # The file as shipped, but for the certificate it reads.
    site = NGINX.read_text(encoding="utf-8")
    site = site.replace("/etc/nginx/tls/credvault.crt", str(cert))
    site = site.replace("/etc/nginx/tls/credvault.key", str(key))
    (tmp_path / "credvault.conf").write_text(site, encoding="utf-8")
    # A minimal nginx.conf around it, as Debian's includes sites-enabled/ in its http block;
    # every path nginx writes is in tmp_path.
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\n"
        f"error_log {tmp_path}/error.log;\n"
        "events {}\n"
        "http {\n"
        "    access_log off;\n"
        + "".join(
            f"    {kind}_temp_path {tmp_path}/{kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        + f"    include {tmp_path}/credvault.conf;\n"
        "}\n",
        encoding="utf-8",
    )
    paths = ["-p", str(tmp_path), "-e", str(tmp_path / "error.log")]
    result = subprocess.run(
        [nginx, "-t", *paths, "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


def test_the_repository_tracks_no_file_it_ignores():
    """A file under an ignored path (a tool's cache, `.env`, `var/`) committed by mistake once
    put a `.schemathesis/` cache in every clone."""
    git = shutil.which("git")
    if git is None or not (BASE_DIR / ".git").exists():
        pytest.skip("not a git checkout")
    tracked_but_ignored = subprocess.run(
        [git, "ls-files", "--cached", "--ignored", "--exclude-standard"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked_but_ignored == []
