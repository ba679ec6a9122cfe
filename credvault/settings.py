"""credvault settings: every value comes from the environment (or a `.env` file beside
manage.py), read and typed by the declaration in credvault/configuration.py, which stops the
process with one line on a value of the wrong type or range. Required secrets have no default;
nothing insecure is a default. The rest of misconfiguration is reported by the system checks
in `services/checks.py`."""

from __future__ import annotations

import os

import environ

from credvault import configuration
from services.storage.config import database_settings

BASE_DIR = configuration.BASE_DIR

# The file of settings read at start-up: `.env` beside manage.py, another file named by
# CREDVAULT_ENV_FILE, or none when that is set empty (production: docs/production.md).
try:
    _env_file = configuration.env_file(os.environ, base_dir=BASE_DIR)
except configuration.ConfigurationError as error:
    configuration.fail(error)
ENV_FILE = os.environ.get("CREDVAULT_ENV_FILE", str(BASE_DIR / ".env"))
if _env_file is not None:
    # Values already in the environment win over the file.
    environ.Env.read_env(str(_env_file))
_settings = configuration.checked(os.environ)
# Every declared setting by its name, typed: CREDVAULT_*, DEBUG, ALLOWED_HOSTS, SECURE_*...
globals().update(_settings)

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
DATABASES = {"default": database_settings(_settings["DATABASE_URL"], base_dir=BASE_DIR)}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- cache (rate limits) --------------------------------------------------------------------
CACHES = {"default": _settings["CACHE_URL"]}

# --- HTTPS and production hardening ---------------------------------------------------------
# Secure by default; `make run`'s generated .env turns the redirect off for local plain HTTP.
SECURE_SSL_REDIRECT = _settings["SECURE_SSL_REDIRECT"]
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# Django's setting is the header to trust, or None: the environment's is a yes or no.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if _settings["SECURE_PROXY_SSL_HEADER"] else None
)
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
# Every CREDVAULT_* setting is declared, typed and described in credvault/configuration.py.

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
    "root": {"handlers": ["console"], "level": _settings["LOG_LEVEL"]},
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
        # (providers/outbound.py, WithheldArguments).
        "urllib3": {"level": "WARNING"},
    },
}
