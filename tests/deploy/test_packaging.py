"""The production install (docs/production.md, "Production") is a wheel, not the checkout.

- Every file the packages hold, Python or not (the admin's template and CSS, the catalog), must
  be in it. Once only the catalog was, and the admin's agent page failed with
  TemplateDoesNotExist.
- Its dependencies are everything the production command needs. Once gunicorn's gevent worker
  lacked `packaging` (gunicorn brings it only with its `gevent` extra) and gunicorn would not
  start in a fresh venv; `make`'s venv hid it, because the development tools bring `packaging`.
  So the wheel is installed with its production extra into an empty venv, the production
  guide's steps run there, and gunicorn is started with the checkout's gunicorn.conf.py as
  systemd starts it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.support.harness import BASE_DIR, free_port

PACKAGES = ("credvault", "services", "providers")
# What the production venv is given from this process's environment: the system's path and
# pip's own settings (its index, cache and certificates), nothing of this checkout's settings.
PIP_ENVIRONMENT = ("PATH", "HOME", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR")


def package_files() -> set[str]:
    """The files of the packages as the repository holds them."""
    found = set()
    for package in PACKAGES:
        for path in (BASE_DIR / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(BASE_DIR).as_posix())
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built once from a copy of the checkout (no caches, no local state)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "src"
    shutil.copytree(
        BASE_DIR,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", "var", ".git", "*.egg-info", "build", "__pycache__", ".*_cache", ".env"
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    [built] = wheels.glob("credvault-*.whl")
    return built


def test_the_wheel_holds_every_file_of_the_packages(wheel):
    with zipfile.ZipFile(wheel) as archive:
        held = set(archive.namelist())
    missing = sorted(package_files() - held)
    assert not missing, f"not in the wheel: {missing}"
    assert "services/templates/admin/services/readonly_tabular.html" in held
    assert "services/static/services/admin.css" in held


def pip_env() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if name in PIP_ENVIRONMENT or name.startswith("PIP_")
    }


@pytest.fixture(scope="module")
def production_venv(wheel, tmp_path_factory) -> Path:
    """docs/production.md, step 2: an empty venv, pip upgraded, then the wheel with its
    `postgres` extra and nothing else (pip's cache keeps this to seconds)."""
    venv = tmp_path_factory.mktemp("production") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    for args in (["--upgrade", "pip"], [f"{wheel}[postgres]"]):
        result = subprocess.run(
            [*pip, *args], env=pip_env(), capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr[-2000:]
    return venv


# What deploy/credvault-manage runs: credvault's own entry, the venv's Python.
MANAGE = ("python", "-m", "credvault.manage")


def production_command(venv: Path, *args: str, env: dict[str, str], cwd: Path) -> str:
    """A command of the venv (`python -m credvault.manage ...`), with nothing but `env` around
    it."""
    result = subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{' '.join(args)}: {result.stderr[-2000:]}"
    return result.stdout


@pytest.fixture
def production_settings(production_venv, tmp_path) -> dict[str, str]:
    """docs/production.md, steps 4 and 5: keys from the installed `generate_key`, the
    environment file's settings (a SQLite file here instead of PostgreSQL, a free port), the
    migrations and the deploy check."""
    bare = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "credvault.settings"}
    root = Path("/")
    encryption_key = production_command(production_venv, *MANAGE, "generate_key",
                                        env=bare, cwd=root).strip()  # fmt: skip
    audit_key = production_command(production_venv, *MANAGE, "generate_key",
                                   env=bare, cwd=root).strip()  # fmt: skip
    settings = {
        **bare,
        "CREDVAULT_ENV_FILE": "",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "CREDVAULT_ENCRYPTION_KEYS": encryption_key,
        "CREDVAULT_AUDIT_KEYS": audit_key,
        "DEBUG": "false",
        "ALLOWED_HOSTS": "vault.example.com",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'credvault.sqlite3'}",
        "CACHE_URL": "redis://127.0.0.1:6379/0",
        "SECURE_SSL_REDIRECT": "true",
        "SECURE_PROXY_SSL_HEADER": "true",
        "SECURE_HSTS_SECONDS": "31536000",
        "CREDVAULT_BIND": f"127.0.0.1:{free_port()}",
        "WEB_CONCURRENCY": "4",
        "LOG_LEVEL": "INFO",
    }
    production_command(production_venv, *MANAGE, "migrate", "--no-input",
                       env=settings, cwd=root)  # fmt: skip
    checked = production_command(production_venv, *MANAGE, "check", "--deploy",
                                 "--fail-level", "WARNING", env=settings, cwd=root)  # fmt: skip
    assert checked.strip() == "System check identified no issues (1 silenced)."
    return settings


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_gunicorn_serves_from_the_installed_wheel(production_venv, production_settings, tmp_path):
    """docs/production.md, step 6, as deploy/credvault.service runs it: gunicorn from the venv
    with the checkout's gunicorn.conf.py, in an empty state directory (not the checkout), with
    the environment file's settings and nothing else."""
    state = tmp_path / "state"
    state.mkdir()
    log = tmp_path / "gunicorn.log"
    url = f"http://{production_settings['CREDVAULT_BIND']}"
    with log.open("wb") as handle:
        server = subprocess.Popen(
            [str(production_venv / "bin" / "gunicorn"), "-c", str(BASE_DIR / "gunicorn.conf.py"),
             "credvault.wsgi:application"],
            cwd=state,
            env=production_settings,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        status, body = None, b""
        deadline = time.monotonic() + 30
        while server.poll() is None and time.monotonic() < deadline:
            try:
                status, body = get(f"{url}/healthz")
                break
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        assert server.poll() is None, f"gunicorn exited: {log.read_text()[-3000:]}"
        assert status == 200, log.read_text()[-3000:]
        assert json.loads(body) == {"status": "ok"}
        # The database and the key ring of the installed package answer too.
        status, body = get(f"{url}/readyz")
        assert status == 200, body
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_every_module_imports_from_the_installed_wheel(production_venv, tmp_path):
    """No module of the packages needs what only the development tools bring: each imports in
    the production venv, from its `site-packages`."""
    script = """
import importlib, pkgutil, sys
import django
django.setup()
import credvault
assert credvault.__file__.startswith(sys.prefix), credvault.__file__
for package in ("credvault", "services", "providers"):
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, f"{package}."):
        importlib.import_module(module.name)
assert importlib.util.find_spec("pytest") is None, "the production venv holds pytest"
"""
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "credvault.settings",
        "CREDVAULT_ENV_FILE": "",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'imports.sqlite3'}",
    }
    result = subprocess.run(
        [str(production_venv / "bin" / "python"), "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_errors_and_hints_name_credvault_manage_where_credvault_is_installed(
    production_venv, tmp_path
):
    """deploy/credvault-manage runs the venv's `python -m credvault.manage`, a name the operator
    never typed: a bad argument and a failing check's hint name `credvault-manage`, the command
    docs/production.md has them run, never `manage.py` (which the install has not)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "credvault.settings",
        "CREDVAULT_ENV_FILE": "",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "CREDVAULT_ENCRYPTION_KEYS": "bad",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'hints.sqlite3'}",
    }

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(production_venv / "bin" / "python"), "-m", "credvault.manage", *args],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    checked = run("list_tokens")
    assert checked.returncode == 1
    assert "credvault.E002" in checked.stderr
    assert "`credvault-manage generate_key` prints one" in checked.stderr
    assert "manage.py" not in checked.stderr
    bad_argument = run("issue_token", "acme", "--expires-in", "x")
    assert bad_argument.returncode == 2
    assert bad_argument.stderr.startswith("credvault-manage issue_token: error: ")
    usage = run("issue_token", "--help")
    assert usage.returncode == 0
    assert usage.stdout.startswith("usage: credvault-manage issue_token ")
    assert "TOKEN=$(credvault-manage issue_token demo)" in " ".join(usage.stdout.split())
