"""The session and CSRF cookies are Secure everywhere but the local `.env`'s plain HTTP: read
from the settings as a fresh process loads them."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from tests.conftest import TEST_AUDIT_KEYS, TEST_KEYS
from tests.support.harness import BASE_DIR

# slow: each case starts a Python process that loads the settings.
pytestmark = pytest.mark.slow

SHOW = (
    "import os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'credvault.settings'; "
    "django.setup(); from django.conf import settings as s; "
    "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_HTTPONLY, "
    "s.CSRF_COOKIE_HTTPONLY, s.SESSION_COOKIE_SAMESITE, s.CSRF_COOKIE_SAMESITE)"
)


def cookie_settings(**given: str) -> str:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CREDVAULT_", "DATABASE_URL", "CACHE_URL", "SECRET_KEY", "SECURE_"))
    }
    env.update(
        CREDVAULT_ENV_FILE="",
        SECRET_KEY=secrets.token_urlsafe(50),
        CREDVAULT_ENCRYPTION_KEYS=TEST_KEYS,
        CREDVAULT_AUDIT_KEYS=TEST_AUDIT_KEYS,
        **given,
    )
    result = subprocess.run(
        [sys.executable, "-c", SHOW], cwd=BASE_DIR, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("given", "secure"),
    [
        ({"SECURE_SSL_REDIRECT": "true"}, True),
        # Behind a proxy that redirects to HTTPS itself: still Secure.
        ({"SECURE_SSL_REDIRECT": "false"}, True),
        ({"SECURE_SSL_REDIRECT": "false", "CREDVAULT_ENVIRONMENT": "local"}, False),
        ({"SECURE_SSL_REDIRECT": "true", "CREDVAULT_ENVIRONMENT": "local"}, True),
    ],
)
def test_secure_outside_local_httponly_and_lax_always(given, secure):
    assert cookie_settings(**given) == f"{secure} {secure} True True Lax Lax"
