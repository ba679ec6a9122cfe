"""credvault settings: every value comes from the environment (or a `.env` file beside
manage.py), read with django-environ. Required secrets have no default; nothing insecure is a
default. Misconfiguration is reported by the system checks in `services/checks.py`."""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    # Values already in the environment win over the file.
    env.read_env(BASE_DIR / ".env")

# Empty when unset: the check credvault.E001 then stops every command with a clear message.
SECRET_KEY = env.str("SECRET_KEY", default="")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "services",
    "providers",
]

MIDDLEWARE = [
    # Outermost: request id, access log and Cache-Control for every response.
    "services.api.middleware.RequestContextMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "credvault.urls"
CSRF_FAILURE_VIEW = "services.api.errors.csrf_failure"
WSGI_APPLICATION = "credvault.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------
DATABASES = {"default": env.db("DATABASE_URL", default="sqlite:///var/credvault.sqlite3")}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # A relative SQLite path is relative to the project, not to the working directory.
    if _db["NAME"] != ":memory:" and not Path(_db["NAME"]).is_absolute():
        _db["NAME"] = str(BASE_DIR / _db["NAME"])
    # Several gunicorn workers write to one file: WAL lets readers run beside the writer, the
    # busy timeout makes a writer wait instead of failing with "database is locked", and
    # IMMEDIATE transactions take the write lock at BEGIN, so that no transaction has to
    # upgrade a read lock midway (the upgrade is what fails without waiting).
    _db["ENGINE"] = "credvault.sqlite"
    _db.setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db["ENGINE"] = "credvault.postgresql"  # a health check without a round trip
    # Values bound by the server, and statements run five times prepared by psycopg: the
    # server stops parsing and planning the same few statements on every request (measured:
    # BENCHMARKS.md). Behind PgBouncer in transaction mode, prepared statements need
    # PgBouncer 1.21 or later with max_prepared_statements set.
    # Django turns psycopg's prepared statements off unless OPTIONS names a threshold.
    _db.setdefault("OPTIONS", {}).setdefault("server_side_binding", True)
    _db["OPTIONS"].setdefault("prepare_threshold", 5)
# Each gunicorn worker keeps its connection between requests (checked before reuse, so a
# database that went away is reconnected to). On SQLite this also spares every request a
# fresh connection and a WAL checkpoint at its close.
_db.setdefault("CONN_MAX_AGE", 600)
_db.setdefault("CONN_HEALTH_CHECKS", True)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- cache (rate limits) --------------------------------------------------------------------
# `locmem://` (the contract's spelling) is django-environ's `locmemcache://`.
_cache_url = env.str("CACHE_URL", default="locmem://")
if _cache_url.startswith("locmem://"):
    _cache_url = "locmemcache://" + _cache_url.removeprefix("locmem://")
CACHES = {"default": env.cache_url_config(_cache_url)}
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache":
    CACHES["default"]["BACKEND"] = "credvault.cache.LocMemCache"  # no memcached key checks

# --- HTTPS and production hardening ---------------------------------------------------------
# Secure by default; `make run`'s generated .env turns the redirect off for local plain HTTP.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
if env.bool("SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env.int(
    "SECURE_HSTS_SECONDS", default=31_536_000 if SECURE_SSL_REDIRECT else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", default=SECURE_HSTS_SECONDS > 0
)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Preloading a domain into browsers is hard to undo: the operator's decision, off by default
# (README, "Production"). Django's reminder of it is therefore silenced.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
SESSION_COOKIE_SECURE = SECURE_SSL_REDIRECT
CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- i18n, static ---------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Admin and API-docs assets come from the installed packages, served by WhiteNoise without a
# collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = False

# --- credvault ------------------------------------------------------------------------------
# Raw strings here; parsed and validated by the system checks and the modules that use them.
CREDVAULT_ENCRYPTION_KEYS = env.str("CREDVAULT_ENCRYPTION_KEYS", default="")
CREDVAULT_PROVIDER_BASE_URLS = env.str("CREDVAULT_PROVIDER_BASE_URLS", default="{}")
CREDVAULT_MAX_SERVICES_PER_ACCOUNT = env.int("CREDVAULT_MAX_SERVICES_PER_ACCOUNT", default=100)
CREDVAULT_VERIFY_TIMEOUT = env.float("CREDVAULT_VERIFY_TIMEOUT", default=5.0)
CREDVAULT_RATE_LIMIT = env.str("CREDVAULT_RATE_LIMIT", default="600/min")
CREDVAULT_TEST_RATE_LIMIT = env.str("CREDVAULT_TEST_RATE_LIMIT", default="30/min")

# --- REST framework and OpenAPI -------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["services.api.authentication.AccountTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Documents the media type of request bodies in the OpenAPI schema. The views never read
    # `request.data`: bodies go through the strict reader of services/api/parsing.py.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_THROTTLE_CLASSES": [],
    "EXCEPTION_HANDLER": "services.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "UNAUTHENTICATED_TOKEN": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "credvault account API",
    "DESCRIPTION": (
        "Connected services of an account: list them, test credentials against the "
        "provider, store or replace them (encrypted at rest), remove them. Credential values "
        "are never returned. Errors are RFC 9457 problem details."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "services.api.schema.close_objects",
    ],
}

# --- logging --------------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        # Prints tracebacks without exception messages, which can carry data (see the module).
        "plain": {
            "()": "services.logs.RedactingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # credvault.access logs every request once; Django's own per-response warnings repeat it.
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "ERROR"},
        # urllib3 logs request lines with their URLs at DEBUG; a URL can hold a key.
        "urllib3": {"level": "WARNING"},
    },
}
