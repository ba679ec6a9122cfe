"""System checks: misconfiguration stops `manage.py check`, `migrate` and the server at
start-up with a clear message (ids credvault.E001 and up), never at the first request."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from providers.bases import (
    BaseUrlError,
    parse_base_urls,
    parse_host_patterns,
    unknown_bases,
)
from providers.http.destinations import parse_allowed_hosts
from providers.oauth import OAuthUrlError, parse_oauth_urls
from services.checkpoints import audit_keys
from services.crypto import KeyRing, KeyRingError, key_ring
from services.management.base import manage_command
from services.rates import RateError, parse_rate
from services.sealed import outside_ring


@register()
def check_secret_key(app_configs, **kwargs):
    try:
        configured = bool(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django refuses to hand out an empty SECRET_KEY
        configured = False
    if not configured:
        return [
            Error(
                "SECRET_KEY is not set.",
                hint="Set SECRET_KEY in the environment or .env (`make run` writes one).",
                id="credvault.E001",
            )
        ]
    return []


@register()
def check_encryption_keys(app_configs, **kwargs):
    try:
        KeyRing.parse(settings.CREDVAULT_ENCRYPTION_KEYS)
    except KeyRingError as exc:
        return [
            Error(
                f"CREDVAULT_ENCRYPTION_KEYS is invalid: {exc}.",
                hint="Comma-separated KEYID:BASE64KEY entries, each key 32 bytes, ids unique; "
                f"`{manage_command()} generate_key` prints one.",
                id="credvault.E002",
            )
        ]
    return []


@register()
def check_audit_keys(app_configs, **kwargs):
    errors = []
    try:
        audit_keys()
    except KeyRingError as exc:
        errors.append(
            Error(
                f"CREDVAULT_AUDIT_KEYS is invalid: {exc}.",
                hint="The keys that sign audit checkpoints, in the format of "
                "CREDVAULT_ENCRYPTION_KEYS (the first signs, every one verifies); "
                f"`{manage_command()} generate_key` prints one. Keep them apart from the "
                "database.",
                id="credvault.E010",
            )
        )
    if settings.CREDVAULT_AUDIT_CHECKPOINT_SECONDS < 0:
        errors.append(
            Error(
                "CREDVAULT_AUDIT_CHECKPOINT_SECONDS must be 0 (every event) or more.",
                id="credvault.E011",
            )
        )
    return errors


@register()
def check_provider_base_urls(app_configs, **kwargs):
    try:
        overrides = parse_base_urls(settings.CREDVAULT_PROVIDER_BASE_URLS)
        problems = [
            f"CREDVAULT_PROVIDER_BASE_URLS[{key!r}] names a base that the catalog does not "
            "give this provider"
            for key in unknown_bases(overrides)
        ]
    except BaseUrlError as exc:
        problems = [str(exc)]
    return [
        Error(
            f"{problem}.",
            hint='A JSON object such as {"github": "https://github.example.com/api/v3"} '
            '(a base: {"huggingface~router": "https://router.example.com"}).',
            id="credvault.E003",
        )
        for problem in problems
    ]


@register()
def check_provider_host_patterns(app_configs, **kwargs):
    try:
        parse_host_patterns(settings.CREDVAULT_PROVIDER_HOST_PATTERNS)
    except BaseUrlError as exc:
        return [
            Error(
                f"{exc}.",
                hint='A JSON object such as {"pinecone": "*.svc.*.pinecone.example.com"}.',
                id="credvault.E024",
            )
        ]
    return []


@register()
def check_oauth_settings(app_configs, **kwargs):
    """OAuth's settings: the OAuth URL replacements, the public URL, the refresh window."""
    errors = []
    try:
        parse_oauth_urls(settings.CREDVAULT_PROVIDER_OAUTH_URLS)
    except OAuthUrlError as exc:
        errors.append(
            Error(
                f"{exc}.",
                hint='A JSON object such as {"github": {"authorize": "https://...", '
                '"token": "https://..."}}.',
                id="credvault.E014",
            )
        )
    public = urlsplit(settings.CREDVAULT_PUBLIC_URL)
    if public.scheme not in ("http", "https") or not public.hostname or public.query:
        errors.append(
            Error(
                "CREDVAULT_PUBLIC_URL must be the http(s) address browsers reach this server at.",
                id="credvault.E015",
            )
        )
    if settings.CREDVAULT_REFRESH_AHEAD < 0:
        errors.append(
            Error("CREDVAULT_REFRESH_AHEAD must be 0 or more seconds.", id="credvault.E018")
        )
    # A use waits for another worker's refresh this long and 10 s more: above 20 s, raise
    # nginx's proxy_read_timeout too (deploy/nginx.conf: 35 s).
    if not 0 < settings.CREDVAULT_OAUTH_TIMEOUT <= 60:
        errors.append(
            Error("CREDVAULT_OAUTH_TIMEOUT must be above 0 and at most 60.", id="credvault.E020")
        )
    if not 1 <= settings.CREDVAULT_REFRESH_RETRY_SECONDS <= 3600:
        errors.append(
            Error(
                "CREDVAULT_REFRESH_RETRY_SECONDS must be at least 1 and at most 3600.",
                id="credvault.E021",
            )
        )
    return errors


@register()
def check_limits(app_configs, **kwargs):
    errors = []
    for name in ("CREDVAULT_RATE_LIMIT", "CREDVAULT_TEST_RATE_LIMIT", "CREDVAULT_PROXY_RATE_LIMIT"):
        try:
            parse_rate(getattr(settings, name))
        except RateError as exc:
            errors.append(Error(f"{name}: {exc}.", id="credvault.E004"))
    if settings.CREDVAULT_MAX_SERVICES_PER_ACCOUNT < 1:
        errors.append(
            Error("CREDVAULT_MAX_SERVICES_PER_ACCOUNT must be at least 1.", id="credvault.E005")
        )
    if not 0 < settings.CREDVAULT_VERIFY_TIMEOUT <= 60:
        errors.append(
            Error("CREDVAULT_VERIFY_TIMEOUT must be above 0 and at most 60.", id="credvault.E006")
        )
    if not 0 < settings.CREDVAULT_BODY_TIMEOUT <= 300:
        errors.append(
            Error("CREDVAULT_BODY_TIMEOUT must be above 0 and at most 300.", id="credvault.E012")
        )
    # Above 30 s, raise nginx's proxy_read_timeout too (deploy/nginx.conf: 35 s).
    if not 0 < settings.CREDVAULT_PROXY_TIMEOUT <= 300:
        errors.append(
            Error("CREDVAULT_PROXY_TIMEOUT must be above 0 and at most 300.", id="credvault.E013")
        )
    if not settings.CREDVAULT_PROXY_TIMEOUT <= settings.CREDVAULT_PROXY_MAX_DURATION <= 86400:
        errors.append(
            Error(
                "CREDVAULT_PROXY_MAX_DURATION must be at least CREDVAULT_PROXY_TIMEOUT and at "
                "most 86400.",
                id="credvault.E022",
            )
        )
    try:
        parse_allowed_hosts(settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS)
    except ValueError as exc:
        errors.append(Error(f"CREDVAULT_OUTBOUND_ALLOWED_HOSTS: {exc}.", id="credvault.E023"))
    for name, unit in (
        ("CREDVAULT_PROXY_MAX_BODY", "byte"),
        ("CREDVAULT_PROXY_MAX_RESPONSE", "byte"),
        ("CREDVAULT_MCP_MAX_RESULT", "byte"),
        ("CREDVAULT_PROXY_MAX_CONCURRENT", "call"),
    ):
        if getattr(settings, name) < 1:
            errors.append(Error(f"{name} must be at least 1 {unit}.", id="credvault.E019"))
    return errors


@register(Tags.security, deploy=True)
def check_not_local(app_configs, **kwargs):
    """`check --deploy` fails on the settings of the `.env` that `make run` writes."""
    if settings.CREDVAULT_ENVIRONMENT != "local":
        return []
    return [
        Error(
            f"The settings come from a local .env ({settings.ENV_FILE}): plain HTTP, no HSTS, "
            "no secure cookies. It must not configure production.",
            hint="Give production its settings in the environment (or a file named by "
            "CREDVAULT_ENV_FILE) and set CREDVAULT_ENV_FILE= (empty) so that the local .env "
            "is not read; docs/production.md, 'Production'.",
            id="credvault.E009",
        )
    ]


@register(Tags.database)
def check_sealed_keys(app_configs, databases=None, **kwargs):
    """Every sealed value, of every kind, opens with the key ring: a database check
    (`manage.py migrate` and `manage.py check --database default` run it)."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    try:
        ring_ids = key_ring().ids
    except KeyRingError:
        return []  # credvault.E002 says what is wrong with the setting
    try:
        missing = outside_ring(ring_ids)
    except DatabaseError:
        return []  # not migrated yet: nothing is sealed
    return [
        Error(
            f"{count} {kind} value(s) are sealed with key id(s) not in "
            f"CREDVAULT_ENCRYPTION_KEYS: {', '.join(ids)}.",
            hint="Put the key(s) back in CREDVAULT_ENCRYPTION_KEYS (after the first), then run "
            f"`{manage_command()} reencrypt` before removing them.",
            id="credvault.E016",
        )
        for kind, (count, ids) in missing.items()
    ]
