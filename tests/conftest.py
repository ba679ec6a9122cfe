from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from services import checkpoints
from services.accounts import create_account, issue_token
from services.keys import data_keys
from services.rates import parse_rate
from tests.support.harness import listening
from tests.support.helpers import PUBLIC_URL, Api
from tests.support.key_managers import (
    MOTO_KMS_ALIAS,
    SOFTHSM_KEY_LABEL,
    SOFTHSM_TOKEN_LABEL,
    MotoKms,
    SoftHsm,
    require_moto_server,
    require_softhsm,
)
from tests.support.stand_ins import OAuthServer, ProviderServer

# Fixed test keys: `old` first would seal; tests that rotate put `new` first.
KEY_A = base64.b64encode(b"A" * 32).decode()
KEY_B = base64.b64encode(b"B" * 32).decode()
TEST_KEYS = f"test-a:{KEY_A}"
TEST_AUDIT_KEYS = f"audit-a:{base64.b64encode(b'C' * 32).decode()}"


TESTS_DIR = Path(__file__).resolve().parent
# Every test of these folders is `slow` (real SDKs, Chromium, gunicorn and nginx as production
# runs them); elsewhere a slow module says so itself with `pytestmark = pytest.mark.slow`.
SLOW_FOLDERS = frozenset({"sdks", "browser", "deploy"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(TESTS_DIR) and path.relative_to(TESTS_DIR).parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


def pytest_report_header(config: pytest.Config) -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    return f"credvault database: {db['ENGINE'].rsplit('.', 1)[-1]}"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """SQLite tests run on a file, as production does: the concurrency tests need real
    separate connections, which an in-memory shared-cache database does not give. One file per
    process (each xdist worker has its own), in the temporary directory: var/ holds only what
    the tests look at there."""
    from django.conf import settings
    from django.db import connection

    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        name = Path(tempfile.gettempdir()) / f"credvault-test-{os.getpid()}.sqlite3"
        db.setdefault("TEST", {})["NAME"] = str(name)


@pytest.fixture(autouse=True)
def _test_settings(settings) -> Iterator[None]:
    settings.CREDVAULT_ENCRYPTION_KEYS = TEST_KEYS
    settings.CREDVAULT_AUDIT_KEYS = TEST_AUDIT_KEYS
    # No checkpoint but where a test asks for one: the query-count tests count every query.
    settings.CREDVAULT_AUDIT_CHECKPOINT_SECONDS = 10**9
    checkpoints._clocks.clear()
    settings.CREDVAULT_PROVIDER_BASE_URLS = "{}"
    settings.CREDVAULT_VERIFY_TIMEOUT = 2.0
    settings.CREDVAULT_RATE_LIMIT = parse_rate("600/min")
    settings.CREDVAULT_TEST_RATE_LIMIT = parse_rate("30/min")
    settings.CREDVAULT_MAX_SERVICES_PER_ACCOUNT = 100
    cache.clear()
    # The data keys a test creates are rolled back with it: so is this process's cache of them.
    data_keys.cache.clear()
    data_keys.forget_uncommitted()
    yield
    cache.clear()
    data_keys.cache.clear()


def require_local_service(name: str, port: int) -> None:
    """Skip a test whose service is not running here, except in CI (`.ci/run` sets
    CREDVAULT_REQUIRE_SERVICES=1), where its absence is a failure."""
    if not listening(port):
        message = f"{name} is not running on 127.0.0.1:{port} (see CONTRIBUTING.md, 'Tests')"
        if os.environ.get("CREDVAULT_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)


REDIS_URL = "redis://127.0.0.1:6379/15"
# This run's keys on the shared Redis: two runs on one machine never see each other's.
REDIS_PREFIX = f"credvault-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def clear_redis_keys(prefix: str = REDIS_PREFIX) -> None:
    """Delete this run's keys, leaving every other key on the server alone."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)


@pytest.fixture
def redis_cache(settings):
    """The default cache on a real Redis, under this run's key prefix, emptied around the
    test."""
    require_local_service("Redis", 6379)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": REDIS_PREFIX,
        }
    }
    clear_redis_keys()
    yield cache
    clear_redis_keys()


def _account_with_token(name: str) -> tuple:
    account = create_account(name=name)
    issued = issue_token(account=account, name="tests")
    # Marked as just used, so that a request does not also write last_used_at.
    issued.token.last_used_at = timezone.now()
    issued.token.save(update_fields=["last_used_at"])
    return account, issued.plaintext


@pytest.fixture
def alice_account_and_token(db):
    return _account_with_token("alice")


@pytest.fixture
def bob_account_and_token(db):
    return _account_with_token("bob")


@pytest.fixture
def alice(alice_account_and_token):
    return alice_account_and_token[0]


@pytest.fixture
def bob(bob_account_and_token):
    return bob_account_and_token[0]


@pytest.fixture
def alice_api(alice_account_and_token) -> Api:
    return Api(Client(raise_request_exception=False), alice_account_and_token[1])


@pytest.fixture
def bob_api(bob_account_and_token) -> Api:
    return Api(Client(raise_request_exception=False), bob_account_and_token[1])


@pytest.fixture
def anonymous_api(db) -> Api:
    return Api(Client(raise_request_exception=False), None)


@pytest.fixture
def provider_server(settings) -> Iterator[ProviderServer]:
    """A local HTTP server standing in for every catalog provider."""
    server = ProviderServer().start()
    from providers.catalog import catalog

    urls = {provider_id: server.url for provider_id in catalog()}
    for provider in catalog().values():  # and each other base: `huggingface~router`
        urls.update({f"{provider.id}~{name}": server.url for name in provider.bases})
    settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(urls)
    yield server
    server.stop()


@pytest.fixture
def stand_in(settings) -> Iterator[OAuthServer]:
    """An OAuth provider on 127.0.0.1 (tests/support/stand_ins.py) as the authorization server
    and the API of github, zoom, slack, salesforce and figma (figma refreshing at a URL of its
    own), with credvault's public URL PUBLIC_URL."""
    server = OAuthServer().start()
    settings.CREDVAULT_PUBLIC_URL = PUBLIC_URL
    urls = {"authorize": f"{server.url}/authorize", "token": f"{server.url}/token"}
    providers = ("github", "zoom", "slack", "salesforce")
    settings.CREDVAULT_PROVIDER_OAUTH_URLS = json.dumps(
        {**dict.fromkeys(providers, urls), "figma": {**urls, "refresh": f"{server.url}/refresh"}}
    )
    settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps(
        dict.fromkeys((*providers, "figma"), f"{server.url}/api")
    )
    yield server
    server.stop()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture
def browser() -> Iterator:
    """Headless Chromium at 1400x900, driven by selenium. The test is skipped where selenium
    (the `dev` extra) or Chromium and its driver (Debian: `apt-get install chromium
    chromium-driver`) are absent, except that `.ci/run`, which installs Chromium and sets
    CREDVAULT_REQUIRE_BROWSER=1, fails it without Chromium."""
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (the `dev` extra holds it)"
    )
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    if not (CHROMIUM and CHROMEDRIVER):
        message = (
            "Chromium and its driver are not installed (apt-get install chromium chromium-driver)"
        )
        if os.environ.get("CREDVAULT_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(1400, 900)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def moto_kms() -> Iterator[MotoKms]:
    """moto's KMS server on a free loopback port (tests/support/key_managers.py), one for each
    process (each xdist worker), with one key under MOTO_KMS_ALIAS (its ARN in `.aliases`);
    `.env` is boto3's environment for it. Shared: a test that stops or pauses a KMS starts a
    MotoKms of its own."""
    require_moto_server()
    kms = MotoKms().start()
    try:
        kms.create_key(alias=MOTO_KMS_ALIAS)
        yield kms
    finally:
        kms.close()


@pytest.fixture(scope="session")
def softhsm() -> Iterator[SoftHsm]:
    """A SoftHSM2 token SOFTHSM_TOKEN_LABEL holding the AES-256 key SOFTHSM_KEY_LABEL
    (tests/support/key_managers.py), one for each process (each xdist worker). SoftHSM reads
    SOFTHSM2_CONF when its library is initialised, once a process: the token's is put in
    os.environ (so servers that a test starts see it too) and the library, if this process
    had loaded it already, is initialised again to read it."""
    require_softhsm()
    import pkcs11

    hsm = SoftHsm(token_label=SOFTHSM_TOKEN_LABEL)
    previous = os.environ.get("SOFTHSM2_CONF")
    try:
        hsm.generate_key(SOFTHSM_KEY_LABEL)
        os.environ.update(hsm.env)
        pkcs11.lib(str(hsm.module)).reinitialize()
        yield hsm
    finally:
        if previous is None:
            os.environ.pop("SOFTHSM2_CONF", None)
        else:
            os.environ["SOFTHSM2_CONF"] = previous
        hsm.close()


@pytest.fixture
def cached_data_keys():
    """A call that caches the data keys stored so far, as a worker holds them at steady state
    (a test's transaction never commits, so the keys it created are otherwise read from the
    database at every use)."""
    from services.models import DataKey

    def cache_them() -> None:
        data_keys.forget_uncommitted()
        # Oldest first: each account's newest version is the current one.
        for row in DataKey.objects.order_by("account_id", "version"):
            data_keys.cache.put(
                row.reference,
                data_keys.unwrap(row),
                account_id=row.account_id,
                current=True,
                used=False,
            )

    return cache_them


KEY_MANAGERS = ("local", "aws-kms", "pkcs11")


def use_key_manager(request, settings, monkeypatch, name: str) -> None:
    """Configure the key manager `name` for the rest of the test: the local ring, moto's KMS
    server or a SoftHSM2 token, real processes and libraries (tests/support/key_managers.py).
    The ring stays given (the old ring, under another manager)."""
    from services.keys import managers

    if name == "aws-kms":
        kms = request.getfixturevalue("moto_kms")
        for variable, value in kms.env.items():
            monkeypatch.setenv(variable, value)
        settings.CREDVAULT_KMS_KEY_ID = MOTO_KMS_ALIAS
    elif name == "pkcs11":
        hsm = request.getfixturevalue("softhsm")
        settings.CREDVAULT_PKCS11_MODULE = str(hsm.module)
        settings.CREDVAULT_PKCS11_TOKEN_LABEL = hsm.token_label
        settings.CREDVAULT_PKCS11_PIN_FILE = str(hsm.pin_file)
        settings.CREDVAULT_PKCS11_KEY_LABEL = SOFTHSM_KEY_LABEL
    settings.CREDVAULT_KEY_MANAGER = name
    managers._built.cache_clear()
    data_keys.cache.clear()
    request.addfinalizer(managers._built.cache_clear)


@pytest.fixture(params=KEY_MANAGERS)
def each_key_manager(request, settings, monkeypatch) -> str:
    """The test once under each key manager (`use_key_manager`)."""
    use_key_manager(request, settings, monkeypatch, request.param)
    return request.param
