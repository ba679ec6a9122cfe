"""System checks: misconfiguration stops `manage.py check`, `migrate` and the server at
start-up with a clear message (ids credvault.E001 and up), never at the first request. The
settings' ranges and their ids are declared in credvault/configuration.py; the checks tagged
SETTINGS_TAG are the ones manage.py runs before any command, each error in one line."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from credvault.configuration import BY_NAME, problems
from providers import catalog
from providers.bases import (
    BaseUrlError,
    parse_base_urls,
    parse_host_patterns,
    unknown_bases,
)
from providers.http.destinations import parse_allowed_hosts
from providers.identifiers import split_base
from providers.oauth import OAuthUrlError, parse_oauth_urls
from services.checkpoints import audit_keys
from services.crypto import KeyRing, KeyRingError
from services.keys import canary
from services.keys.managers import (
    LOCAL,
    RING_WRAPPED,
    KeyManagerError,
    key_manager,
    ring_expected,
    settings_problem,
)
from services.keys.rewrapping import wrapped_elsewhere
from services.management.base import manage_command
from services.sealed import outside_ring, ring_ids

# The checks of settings' values alone (no database): manage.py runs them before any command.
SETTINGS_TAG = "settings"


def _check_id(name: str) -> str:
    check = BY_NAME[name].check
    assert check is not None
    return check.id


@register(SETTINGS_TAG)
def check_setting_ranges(app_configs, **kwargs):
    """Every declared setting within its declared range (its values come typed from
    credvault/configuration.py; an override in a test may still leave it)."""
    checked = {name: getattr(settings, name) for name, one in BY_NAME.items() if one.check}
    return [
        Error(message, id=setting.check.id)
        for setting, message in problems(checked)
        if setting.check is not None
    ]


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
    """The ring is required under `local`; under another manager it is the old ring, checked
    only when given."""
    if not ring_expected():
        return []
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


@register(SETTINGS_TAG)
def check_key_manager_settings(app_configs, **kwargs):
    """The chosen key manager's settings are all given, and its PIN file is readable."""
    if settings.CREDVAULT_KEY_MANAGER == LOCAL:
        return []
    unusable = settings_problem()
    if unusable is not None:
        return [
            Error(
                f"{unusable}.",
                hint="docs/key-managers.md says what each key manager needs.",
                id=canary.SETTINGS,
            )
        ]
    return []


@register(Tags.database)
def check_key_manager(app_configs, databases=None, **kwargs):
    """The start-up self-check: the key manager unwraps the canary's data key and the canary
    value opens (a database check: `manage.py check --database default`, `migrate`, and
    every worker before it serves). Then the data keys still wrapped by a key-encryption key
    that is not the current one, named."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    if settings_problem() is not None:
        return []  # credvault.E002 or E029 says what is wrong with the settings
    try:
        found = canary.problem()
    except DatabaseError:
        return []  # not migrated yet: nothing is sealed
    if found is not None:
        check_id, message = found
        return [
            Error(
                f"{message}.",
                hint="No worker serves until the key manager unwraps the canary "
                "(docs/key-managers.md).",
                id=check_id,
            )
        ]
    manager = key_manager()
    try:
        current = manager.current()
    except KeyManagerError:
        return []
    return [
        Warning(
            f"{count} data key(s) are wrapped by {wrapped_by}, which is not the current "
            f"key-encryption key ({current}).",
            hint=f"`{manage_command()} rotate_keys` wraps them again under the current one"
            + (
                f"; `{manage_command()} migrate_key_manager` moves them from the local ring."
                if wrapped_by.startswith(RING_WRAPPED) and manager.name != LOCAL
                else "."
            ),
            id="credvault.W033",
        )
        for wrapped_by, count in wrapped_elsewhere(current=current).items()
    ]


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
    return errors


@register(SETTINGS_TAG)
def check_provider_base_urls(app_configs, **kwargs):
    try:
        overrides = parse_base_urls(settings.CREDVAULT_PROVIDER_BASE_URLS)
        # A key with a base (`id~base`) is judged by unknown_bases, unknown provider or not.
        found = [
            f"CREDVAULT_PROVIDER_BASE_URLS[{key!r}] names no provider of the catalog"
            for key in overrides
            if split_base(key)[1] is None and catalog.get(key) is None
        ] + [
            f"CREDVAULT_PROVIDER_BASE_URLS[{key!r}] names a base that the catalog does not "
            "give this provider"
            for key in unknown_bases(overrides)
        ]
    except BaseUrlError as exc:
        found = [str(exc)]
    except catalog.CatalogError:
        return []  # credvault.E017 says what is wrong with the catalog
    return [
        Error(
            f"{problem}.",
            hint='A JSON object such as {"github": "https://github.example.com/api/v3"} '
            '(a base: {"huggingface~router": "https://router.example.com"}).',
            id=_check_id("CREDVAULT_PROVIDER_BASE_URLS"),
        )
        for problem in found
    ]


@register(SETTINGS_TAG)
def check_provider_host_patterns(app_configs, **kwargs):
    try:
        parse_host_patterns(settings.CREDVAULT_PROVIDER_HOST_PATTERNS)
    except BaseUrlError as exc:
        return [
            Error(
                f"{exc}.",
                hint='A JSON object such as {"pinecone": "*.svc.*.pinecone.example.com"}.',
                id=_check_id("CREDVAULT_PROVIDER_HOST_PATTERNS"),
            )
        ]
    return []


@register(SETTINGS_TAG)
def check_oauth_settings(app_configs, **kwargs):
    """OAuth's settings: the OAuth URL replacements and the public URL."""
    errors = []
    try:
        parse_oauth_urls(settings.CREDVAULT_PROVIDER_OAUTH_URLS)
    except OAuthUrlError as exc:
        errors.append(
            Error(
                f"{exc}.",
                hint='A JSON object such as {"github": {"authorize": "https://...", '
                '"token": "https://..."}}.',
                id=_check_id("CREDVAULT_PROVIDER_OAUTH_URLS"),
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
    return errors


@register(SETTINGS_TAG)
def check_limits(app_configs, **kwargs):
    errors = []
    try:
        parse_allowed_hosts(settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS)
    except ValueError as exc:
        errors.append(
            Error(
                f"CREDVAULT_OUTBOUND_ALLOWED_HOSTS: {exc}.",
                id=_check_id("CREDVAULT_OUTBOUND_ALLOWED_HOSTS"),
            )
        )
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
    """Every value sealed before data keys, of every kind, names a key of the ring: a database check
    (`manage.py migrate` and `manage.py check --database default` run it)."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    try:
        ids = ring_ids()
    except KeyRingError:
        return []  # credvault.E002 says what is wrong with the setting
    try:
        missing = outside_ring(ids)
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
