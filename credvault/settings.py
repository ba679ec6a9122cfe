"""credvault settings: every value comes from the environment (or a `.env` file beside
manage.py), read with django-environ. Required secrets have no default; nothing insecure is a
default. Misconfiguration is reported by the system checks in `services/checks.py`."""

from __future__ import annotations

import os
from pathlib import Path

import environ

from services.storage.config import database_settings

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# The file of settings read at start-up: `.env` beside manage.py, another file named by
# CREDVAULT_ENV_FILE, or none when that is set empty (production: docs/production.md).
ENV_FILE = os.environ.get("CREDVAULT_ENV_FILE", str(BASE_DIR / ".env"))
if ENV_FILE and Path(ENV_FILE).is_file():
    # Values already in the environment win over the file.
    env.read_env(ENV_FILE)
# `local` in the `.env` that `make run` writes (plain HTTP on 127.0.0.1): `check --deploy`
# fails on it (credvault.E009), so that a local file never configures production silently.
CREDVAULT_ENVIRONMENT = env.str("CREDVAULT_ENVIRONMENT", default="production")

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
    # Health probes answer here, whatever their Host header: before any host check.
    "services.api.middleware.HealthProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Sessions, the user and messages serve the admin only (services/api/middleware.py).
    "services.api.middleware.AdminSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "services.api.middleware.AdminAuthenticationMiddleware",
    "services.api.middleware.AdminMessageMiddleware",
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
# credvault's own backends and their options, per vendor: services/storage/config.py.
DATABASES = {
    "default": database_settings(
        env.db("DATABASE_URL", default="sqlite:///var/credvault.sqlite3"), base_dir=BASE_DIR
    )
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- cache (rate limits) --------------------------------------------------------------------
# `locmem://` (the contract's spelling) is django-environ's `locmemcache://`.
_cache_url = env.str("CACHE_URL", default="locmem://")
if _cache_url.startswith("locmem://"):
    _cache_url = "locmemcache://" + _cache_url.removeprefix("locmem://")
CACHES = {"default": env.cache_url_config(_cache_url)}

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
# (docs/production.md, "Production"). Django's reminder of it is therefore silenced.
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
# Moments in the admin to the second, with their zone: services/formats/en/formats.py.
FORMAT_MODULE_PATH = ["services.formats"]

STATIC_URL = "static/"
# Admin and API-docs assets come from the installed packages, served by WhiteNoise without a
# collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = False

# --- credvault ------------------------------------------------------------------------------
# Raw strings here; parsed and validated by the system checks and the modules that use them.
CREDVAULT_ENCRYPTION_KEYS = env.str("CREDVAULT_ENCRYPTION_KEYS", default="")
CREDVAULT_PROVIDER_BASE_URLS = env.str("CREDVAULT_PROVIDER_BASE_URLS", default="{}")
# Hosts (`host` or `host:port`, comma-separated) that a provider's host pattern or a redirect
# credvault follows may reach although they are not public or not https.
CREDVAULT_OUTBOUND_ALLOWED_HOSTS = env.str("CREDVAULT_OUTBOUND_ALLOWED_HOSTS", default="")
# JSON object of provider id to a host pattern replacing the catalog's `host_pattern`.
CREDVAULT_PROVIDER_HOST_PATTERNS = env.str("CREDVAULT_PROVIDER_HOST_PATTERNS", default="{}")
CREDVAULT_MAX_SERVICES_PER_ACCOUNT = env.int("CREDVAULT_MAX_SERVICES_PER_ACCOUNT", default=100)
CREDVAULT_VERIFY_TIMEOUT = env.float("CREDVAULT_VERIFY_TIMEOUT", default=5.0)
# Brokered calls: the operator's own catalog entries (a file in the catalog's
# format), the bounds of a call, and the per-agent-token rate.
CREDVAULT_EXTRA_CATALOG = env.str("CREDVAULT_EXTRA_CATALOG", default="")
# Seconds for a provider's answer to begin, and for each silence within it; a streamed answer
# ends at CREDVAULT_PROXY_MAX_DURATION seconds from the call's start.
CREDVAULT_PROXY_TIMEOUT = env.float("CREDVAULT_PROXY_TIMEOUT", default=30.0)
CREDVAULT_PROXY_MAX_DURATION = env.float("CREDVAULT_PROXY_MAX_DURATION", default=600.0)
CREDVAULT_PROXY_MAX_BODY = env.int("CREDVAULT_PROXY_MAX_BODY", default=1024 * 1024)
CREDVAULT_PROXY_MAX_RESPONSE = env.int("CREDVAULT_PROXY_MAX_RESPONSE", default=10 * 1024 * 1024)
# The most of a provider's body that the MCP server's call_api returns (services/mcp/tools.py):
# a longer one is cut there, with `truncated: true`.
CREDVAULT_MCP_MAX_RESULT = env.int("CREDVAULT_MCP_MAX_RESULT", default=256 * 1024)
CREDVAULT_PROXY_RATE_LIMIT = env.str("CREDVAULT_PROXY_RATE_LIMIT", default="600/min")
# Brokered calls of one agent token in flight at once, across workers and hosts sharing the
# cache (CACHE_URL); one more is 429.
CREDVAULT_PROXY_MAX_CONCURRENT = env.int("CREDVAULT_PROXY_MAX_CONCURRENT", default=8)
CREDVAULT_RATE_LIMIT = env.str("CREDVAULT_RATE_LIMIT", default="600/min")
CREDVAULT_TEST_RATE_LIMIT = env.str("CREDVAULT_TEST_RATE_LIMIT", default="30/min")
# OAuth: the address browsers reach this server at (the redirect URI is
# {CREDVAULT_PUBLIC_URL}/oauth/callback), the server-side replacements of the catalog's
# authorization and token URLs, and how many seconds before its expiry a set is refreshed.
CREDVAULT_PUBLIC_URL = env.str("CREDVAULT_PUBLIC_URL", default="http://127.0.0.1:8000")
CREDVAULT_PROVIDER_OAUTH_URLS = env.str("CREDVAULT_PROVIDER_OAUTH_URLS", default="{}")
CREDVAULT_REFRESH_AHEAD = env.int("CREDVAULT_REFRESH_AHEAD", default=120)
# Seconds one request to a token URL (a code exchange, a refresh) may take, in all; and how long
# after a token URL was unavailable a service's refreshes pause (its uses answer 503 at once).
CREDVAULT_OAUTH_TIMEOUT = env.float("CREDVAULT_OAUTH_TIMEOUT", default=15.0)
CREDVAULT_REFRESH_RETRY_SECONDS = env.int("CREDVAULT_REFRESH_RETRY_SECONDS", default=30)
# Seconds a request body may take to arrive, in all (services/api/wsgi.py): then 408.
CREDVAULT_BODY_TIMEOUT = env.float("CREDVAULT_BODY_TIMEOUT", default=10.0)
# The keys that sign audit checkpoints (services/checkpoints.py), in the encryption keys' format.
CREDVAULT_AUDIT_KEYS = env.str("CREDVAULT_AUDIT_KEYS", default="")
CREDVAULT_AUDIT_CHECKPOINT_SECONDS = env.int("CREDVAULT_AUDIT_CHECKPOINT_SECONDS", default=60)

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
    "DEFAULT_SCHEMA_CLASS": "services.api.schema.CredvaultAutoSchema",
    "UNAUTHENTICATED_USER": None,
    "UNAUTHENTICATED_TOKEN": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "credvault account API",
    "DESCRIPTION": (
        "Connected services of an account: list them, test credentials against the "
        "provider, store or replace them (encrypted at rest), remove them; agents with grants "
        "and tokens of their own, which read the services they are granted; the audit trail. "
        "The account API never returns a credential value. Errors are RFC 9457 problem "
        "details (`application/problem+json`)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No serializer serves both directions, so one component each, named after its class
    # (`CredentialInput`, not `CredentialInputRequest`).
    "COMPONENT_SPLIT_REQUEST": False,
    # One named enum per closed set, each from its one definition.
    "ENUM_NAME_OVERRIDES": {
        "KeyType": "services.models.KeyType",
        "AuditAction": "services.models.AuditAction",
        "AuditOutcome": "services.models.AuditOutcome",
        "VerificationReason": "services.api.serializers.REASON_CHOICES",
        "ProblemCode": "services.api.serializers.PROBLEM_CODES",
        "FieldErrorCode": "services.api.serializers.FIELD_ERROR_CODES",
        "ProviderCategory": "services.api.serializers.CATEGORY_CHOICES",
        "GrantAccess": "services.models.GrantAccess",
        "ProxyMethod": "services.models.PROXY_METHODS",
        "ServiceStatus": "services.models.ServiceStatus",
    },
    "TAGS": [
        {"name": "services", "description": "Connected services and their credentials."},
        {"name": "providers", "description": "The provider catalog."},
        {"name": "agents", "description": "Agents and their grants."},
        {"name": "agent-tokens", "description": "The tokens of an agent."},
        {"name": "agent", "description": "What an agent does with its own token."},
        {"name": "audit", "description": "The account's audit trail."},
        {"name": "oauth", "description": "OAuth clients and connecting a provider in a browser."},
    ],
    "POSTPROCESSING_HOOKS": [
        "services.api.schema.complete_responses",
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
    "filters": {"without_traceback": {"()": "services.logs.WithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # credvault.access logs every request once; Django's own per-response warnings repeat it.
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "ERROR"},
        # A request whose Host is not in ALLOWED_HOSTS is answered 400 and logged in one line
        # naming the host, without Django's traceback (the same every time).
        "django.security.DisallowedHost": {"filters": ["without_traceback"]},
        # credvault.audit (every audit event and checkpoint as one JSON line) has no entry: it
        # reaches the root's handler at INFO, beside the access log. Add an entry for it here
        # to send it elsewhere (a file, a SIEM's handler).
        # urllib3 logs request lines with their URLs at DEBUG, and a malformed answer's URL and
        # lines at WARNING; a URL (Telegram's path) or an echoed line can hold a key. Whatever
        # the level, each of its loggers withholds its records' arguments and exceptions
        # (providers/http/library_logs.py, WithheldArguments).
        "urllib3": {"level": "WARNING"},
    },
}
