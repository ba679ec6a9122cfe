"""Every setting credvault reads from the environment, declared once: its name, its parser, its
default, what it accepts and a line saying what it does. credvault/settings.py and
gunicorn.conf.py read the environment through `read`; the range checks (services/checks.py)
and the table of docs/production.md (`python -m credvault.configuration --write`) come from
here. A bad value is one line naming the setting and what it accepts, and exit status 2
(`fail`). Standard library, django-environ and credvault's pure parsers only: gunicorn's
master imports it."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, get_type_hints
from urllib.parse import urlsplit

import environ

from providers.http.destinations import parse_allowed_hosts
from services.rates import parse_rate

# The exit status of a process stopped by its configuration (a usage error, as argparse's).
CONFIGURATION_EXIT_STATUS = 2
# The checkout, or site-packages for an installed credvault: where `.env` is looked for.
BASE_DIR = Path(__file__).resolve().parent.parent

Values = Mapping[str, object]


class ConfigurationError(ValueError):
    """A setting's value that credvault cannot use, in one line naming the setting."""


def fail(error: ConfigurationError) -> NoReturn:
    """Stop the process with the one line, never a traceback."""
    print(f"credvault: {error}", file=sys.stderr)
    raise SystemExit(CONFIGURATION_EXIT_STATUS)


# --- parsers: the environment's text to the setting's type; ValueError when it is not one ---


def text(value: str) -> str:
    return value


def whole_number(value: str) -> int:
    return int(value.strip())


def number(value: str) -> float:
    return float(value.strip())


_TRUE = frozenset({"true", "on", "ok", "y", "yes", "1"})
_FALSE = frozenset({"false", "off", "n", "no", "0", ""})


def boolean(value: str) -> bool:
    word = value.strip().lower()
    if word not in _TRUE | _FALSE:
        raise ValueError(value)
    return word in _TRUE


def comma_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def log_level(value: str) -> str:
    level = value.strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError(value)
    return level


def json_text(value: str) -> str:
    """A JSON setting keeps its text (tests and operators write it so); its shape is checked
    against the catalog by its system check, which needs the catalog loaded."""
    json.loads(value or "{}")
    return value


def database_url(value: str) -> dict[str, object]:
    """django-environ's database settings, for a scheme it knows."""
    if urlsplit(value).scheme not in environ.Env.DB_SCHEMES:
        raise ValueError(value)
    config: dict[str, object] = environ.Env.db_url_config(value)
    return config


def cache_url(value: str) -> dict[str, object]:
    """django-environ's cache settings; `locmem://` is its `locmemcache://`."""
    if value.startswith("locmem://"):
        value = "locmemcache://" + value.removeprefix("locmem://")
    if urlsplit(value).scheme not in environ.Env.CACHE_SCHEMES:
        raise ValueError(value)
    config: dict[str, object] = environ.Env.cache_url_config(value)
    return config


KEY_MANAGERS = ("local", "aws-kms", "pkcs11")


def key_manager_name(value: str) -> str:
    name = value.strip()
    if name not in KEY_MANAGERS:
        raise ValueError(value)
    return name


def allowed_hosts_text(value: str) -> str:
    parse_allowed_hosts(value)
    return value


# --- the declaration ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Check:
    """The system check that reports a setting out of its range."""

    id: str


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting. `accepts` ends "NAME must be ..." in its errors; a number's range is
    `above` (exclusive), `least` (a number, or the name of a setting it may not be below) and
    `most`, reported by `check`. `default` is the environment's text, or a function of the
    values read before it; `shown` is the default as the docs' table shows it."""

    name: str
    parse: Callable[[str], object]
    default: str | Callable[[Values], object] | None
    accepts: str
    description: str
    shown: str = ""
    above: float | None = None
    least: float | str | None = None
    most: float | None = None
    check: Check | None = None

    def problem(self, value: object, values: Values) -> str | None:
        """Why `value` is outside the declared range, or None."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        least = values[self.least] if isinstance(self.least, str) else self.least
        if (
            (self.above is not None and not value > self.above)
            or (isinstance(least, int | float) and value < least)
            or (self.most is not None and value > self.most)
        ):
            return f"{self.name} must be {self.accepts}."
        return None


_SIZE = Check(id="credvault.E019")
_RATE = Check(id="credvault.E004")
_DATA_KEY_CACHE = Check(id="credvault.E028")

# In the order of docs/production.md's table.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "SECRET_KEY", text, "", "long random text", "Django's secret key", shown="none: required"
    ),
    Setting(
        "CREDVAULT_KEY_MANAGER",
        key_manager_name,
        "local",
        "local, aws-kms or pkcs11",
        "who wraps each account's data keys: `local` (the first key of "
        "`CREDVAULT_ENCRYPTION_KEYS`), `aws-kms` or `pkcs11` ([key managers](key-managers.md))",
    ),
    Setting(
        "CREDVAULT_ENCRYPTION_KEYS",
        text,
        "",
        "comma-separated KEYID:BASE64KEY entries (credvault.E002)",
        "comma-separated `KEYID:BASE64KEY` entries of 32-byte keys; under `local` the first "
        "wraps data keys and every one unwraps; under another manager, the old ring while "
        "`migrate_key_manager` moves its keys",
        shown="none: required with `local`",
    ),
    Setting(
        "CREDVAULT_KMS_KEY_ID",
        text,
        "",
        "a KMS key id, ARN or alias (credvault.E029)",
        "`aws-kms`: the KMS key that wraps data keys; boto3's credentials chain and "
        "`AWS_ENDPOINT_URL_KMS` apply",
        shown="none: required with `aws-kms`",
    ),
    Setting(
        "CREDVAULT_PKCS11_MODULE",
        text,
        "",
        "the path of a PKCS#11 module (credvault.E029)",
        "`pkcs11`: the HSM's PKCS#11 library (SoftHSM2: `/usr/lib/softhsm/libsofthsm2.so`)",
        shown="none: required with `pkcs11`",
    ),
    Setting(
        "CREDVAULT_PKCS11_TOKEN_LABEL",
        text,
        "",
        "a token label (credvault.E029)",
        "`pkcs11`: the label of the token holding the key",
        shown="none: required with `pkcs11`",
    ),
    Setting(
        "CREDVAULT_PKCS11_PIN_FILE",
        text,
        "",
        "a readable file holding the user PIN (credvault.E029)",
        "`pkcs11`: a file whose first line is the token's user PIN (never the PIN itself in "
        "the environment)",
        shown="none: required with `pkcs11`",
    ),
    Setting(
        "CREDVAULT_PKCS11_KEY_LABEL",
        text,
        "",
        "the label of an AES key that wraps (credvault.E029)",
        "`pkcs11`: the label of the AES key that wraps data keys",
        shown="none: required with `pkcs11`",
    ),
    Setting(
        "CREDVAULT_DATA_KEY_CACHE_SECONDS",
        whole_number,
        "300",
        "at least 1 and at most 86400 seconds",
        "seconds a worker keeps an unwrapped data key in memory (never written anywhere)",
        least=1,
        most=86400,
        check=_DATA_KEY_CACHE,
    ),
    Setting(
        "CREDVAULT_DATA_KEY_CACHE_USES",
        whole_number,
        "10000",
        "at least 1 use",
        "uses of an unwrapped data key before a worker unwraps it again",
        least=1,
        check=_DATA_KEY_CACHE,
    ),
    Setting(
        "CREDVAULT_AUDIT_KEYS",
        text,
        "",
        "comma-separated KEYID:BASE64KEY entries (credvault.E010)",
        "the keys that sign audit checkpoints, in the same format; the first signs, every one "
        "verifies ([Audit](agents.md#audit))",
        shown="none: required",
    ),
    Setting(
        "CREDVAULT_AUDIT_CHECKPOINT_SECONDS",
        whole_number,
        "60",
        "0 (every event) or more",
        "how long, at most, events wait for a signed checkpoint while events arrive; `0` signs "
        "after every event",
        least=0,
        check=Check(id="credvault.E011"),
    ),
    Setting("DEBUG", boolean, "false", "true or false", ""),
    Setting("ALLOWED_HOSTS", comma_list, "127.0.0.1,localhost", "comma-separated hosts", ""),
    Setting(
        "DATABASE_URL",
        database_url,
        "sqlite:///var/credvault.sqlite3",
        "a database URL such as sqlite:///PATH or postgres://USER:PASSWORD@HOST:5432/NAME",
        "a relative SQLite path is relative to `BASE_DIR` (the checkout; `site-packages` for an "
        "installed credvault); `postgres://...` in production",
    ),
    Setting(
        "CACHE_URL",
        cache_url,
        "locmem://",
        "a cache URL such as locmem:// or redis://HOST:6379/0",
        "`redis://HOST:6379/0` shares rate limits between workers and hosts",
    ),
    Setting(
        "CREDVAULT_PROVIDER_BASE_URLS",
        json_text,
        "{}",
        'a JSON object such as {"github": "https://github.example.com/api/v3"}',
        "JSON object of provider id to base URL, for verification and brokered calls; a key "
        "`id~base` (`huggingface~router`) replaces one of the provider's other bases; "
        "server-side only",
        check=Check(id="credvault.E003"),
    ),
    Setting(
        "CREDVAULT_PROVIDER_HOST_PATTERNS",
        json_text,
        "{}",
        'a JSON object such as {"pinecone": "*.svc.*.pinecone.example.com"}',
        "JSON object of provider id to a host pattern replacing the catalog's `host_pattern` "
        '(`{"pinecone": "*.svc.*.pinecone.example.com"}`), or to the pattern as a URL with '
        "scheme and port (`http://*.svc.internal:8443`); the hosts it matches still obey "
        "`CREDVAULT_OUTBOUND_ALLOWED_HOSTS` "
        "([providers](providers.md#providers-with-more-than-one-host))",
        check=Check(id="credvault.E024"),
    ),
    Setting(
        "CREDVAULT_OUTBOUND_ALLOWED_HOSTS",
        allowed_hosts_text,
        "",
        "comma-separated host or host:port entries",
        "comma-separated `host` or `host:port` that a provider's host pattern or a redirect "
        "credvault follows may reach although they are not public or not `https` (an internal "
        "service); every other such host must be `https` and public",
        shown="empty",
        check=Check(id="credvault.E023"),
    ),
    Setting(
        "CREDVAULT_WEBHOOK_ALLOWED_HOSTS",
        allowed_hosts_text,
        "",
        "comma-separated host or host:port entries",
        "comma-separated `host` or `host:port` that a webhook endpoint's URL may name although "
        "they are not public or not `https` (an internal receiver); every other endpoint must be "
        "`https` and public ([webhooks](webhooks.md#endpoints))",
        shown="empty",
        check=Check(id="credvault.E026"),
    ),
    Setting(
        "CREDVAULT_MAX_SERVICES_PER_ACCOUNT",
        whole_number,
        "100",
        "at least 1",
        "",
        least=1,
        check=Check(id="credvault.E005"),
    ),
    Setting(
        "CREDVAULT_VERIFY_TIMEOUT",
        number,
        "5",
        "above 0 and at most 60",
        "seconds for one whole verification call",
        above=0,
        most=60,
        check=Check(id="credvault.E006"),
    ),
    Setting(
        "CREDVAULT_RATE_LIMIT",
        parse_rate,
        "600/min",
        "a rate such as 600/min",
        "per token, all account operations (`N/s`, `N/min`, `N/hour`, `N/day`)",
        check=_RATE,
    ),
    Setting(
        "CREDVAULT_TEST_RATE_LIMIT",
        parse_rate,
        "30/min",
        "a rate such as 30/min",
        "per token, the test operation",
        check=_RATE,
    ),
    Setting(
        "CREDVAULT_EXTRA_CATALOG",
        text,
        "",
        "a file in the catalog's format",
        "a file of the operator's own `[[providers]]` entries in the catalog's format "
        "([Brokered access](agents.md#brokered-access)); checked at start-up",
        shown="none",
    ),
    Setting(
        "CREDVAULT_PROXY_TIMEOUT",
        number,
        "30",
        "above 0 and at most 300",
        "seconds a brokered call waits for the provider's answer to begin (then "
        "`504 upstream_timeout`), and for each silence within a streamed answer (then the "
        "stream is cut)",
        above=0,
        most=300,
        check=Check(id="credvault.E013"),
    ),
    Setting(
        "CREDVAULT_PROXY_MAX_DURATION",
        number,
        "600",
        "at least CREDVAULT_PROXY_TIMEOUT and at most 86400",
        "seconds one whole brokered call may take, a streamed answer included; then the stream "
        "is cut",
        least="CREDVAULT_PROXY_TIMEOUT",
        most=86400,
        check=Check(id="credvault.E022"),
    ),
    Setting(
        "CREDVAULT_PROXY_MAX_BODY",
        whole_number,
        str(1024 * 1024),
        "at least 1 byte",
        "bytes of a brokered call's request body; above, `413`",
        least=1,
        check=_SIZE,
    ),
    Setting(
        "CREDVAULT_PROXY_MAX_RESPONSE",
        whole_number,
        str(10 * 1024 * 1024),
        "at least 1 byte",
        "bytes of a provider's answer; one that says a longer Content-Length is "
        "`502 upstream_too_large`, a streamed one is cut there",
        least=1,
        check=_SIZE,
    ),
    Setting(
        "CREDVAULT_PROXY_RATE_LIMIT",
        parse_rate,
        "600/min",
        "a rate such as 600/min",
        "per agent token, brokered calls and requests to the MCP server together",
        check=_RATE,
    ),
    Setting(
        "CREDVAULT_MCP_MAX_RESULT",
        whole_number,
        str(256 * 1024),
        "at least 1 byte",
        "bytes of a provider's body that the MCP server's `call_api` returns; past it the "
        "result is cut, `truncated: true` ([MCP](mcp.md))",
        least=1,
        check=_SIZE,
    ),
    Setting(
        "CREDVAULT_PROXY_MAX_CONCURRENT",
        whole_number,
        "8",
        "at least 1 call",
        "brokered calls of one agent token in flight at once, counted on the configured cache "
        "(shared by every worker and host with `CACHE_URL=redis://...`; each worker counts "
        "alone with the default local-memory cache); one more is `429 rate_limited` with "
        "`Retry-After`",
        least=1,
        check=_SIZE,
    ),
    Setting(
        "CREDVAULT_PUBLIC_URL",
        text,
        "http://127.0.0.1:8000",
        "the http(s) address browsers reach this server at",
        "the address browsers reach credvault at; the OAuth redirect URI is "
        "`{CREDVAULT_PUBLIC_URL}/oauth/callback` ([OAuth connections](oauth.md))",
    ),
    Setting(
        "CREDVAULT_PROVIDER_OAUTH_URLS",
        json_text,
        "{}",
        'a JSON object such as {"github": {"authorize": "https://...", "token": "https://..."}}',
        'JSON, provider id to `{"authorize": URL, "token": URL}` and optionally '
        '`"refresh": URL` (a provider that refreshes elsewhere, as Figma does): server-side '
        "replacements of the catalog's OAuth URLs (a self-hosted GitLab, tests)",
        check=Check(id="credvault.E014"),
    ),
    Setting(
        "CREDVAULT_REFRESH_AHEAD",
        whole_number,
        "120",
        "0 or more seconds",
        "seconds before an OAuth set's expiry at which a use refreshes it first",
        least=0,
        check=Check(id="credvault.E018"),
    ),
    Setting(
        "CREDVAULT_OAUTH_TIMEOUT",
        number,
        "15",
        "above 0 and at most 60",
        "seconds one request to a token URL (a code exchange, a refresh) may take, in all "
        "(0 < value <= 60); above 20, raise nginx's `proxy_read_timeout`: a use waits for "
        "another worker's refresh this long and 10 s more",
        above=0,
        most=60,
        check=Check(id="credvault.E020"),
    ),
    Setting(
        "CREDVAULT_REFRESH_RETRY_SECONDS",
        whole_number,
        "30",
        "at least 1 and at most 3600",
        "seconds a service's refreshes pause after its token URL was unavailable; meanwhile its "
        "uses answer `503 provider_unavailable` at once with `Retry-After`, on every worker "
        "and host (1 to 3600)",
        least=1,
        most=3600,
        check=Check(id="credvault.E021"),
    ),
    Setting(
        "CREDVAULT_APPROVAL_TTL",
        whole_number,
        "900",
        "at least 60 and at most 86400 seconds",
        "seconds a call's approval waits for a member's decision, and an approved "
        '"allow once" for its one call ([consent](consent.md))',
        least=60,
        most=86400,
        check=Check(id="credvault.E025"),
    ),
    Setting(
        "CREDVAULT_APPROVAL_MAX_WAIT",
        whole_number,
        "120",
        "0 to 600 seconds",
        "the longest `Prefer: wait=N` a brokered call may hold for a decision; a longer wait "
        "asked is cut to it ([consent](consent.md)); above 120, raise nginx's "
        "`proxy_read_timeout` of brokered calls above it",
        least=0,
        most=600,
        check=Check(id="credvault.E027"),
    ),
    Setting(
        "SECURE_SSL_REDIRECT",
        boolean,
        "true",
        "true or false",
        "redirect to HTTPS and send HSTS; also marks cookies Secure. `make run`'s `.env` sets "
        "it `false` for local HTTP",
    ),
    Setting(
        "SECURE_PROXY_SSL_HEADER",
        boolean,
        "false",
        "true or false",
        "trust `X-Forwarded-Proto: https` from a TLS-terminating proxy, and the last address "
        "of its `X-Forwarded-For` as the client's (the sign-in limits)",
    ),
    Setting(
        "SECURE_HSTS_SECONDS",
        whole_number,
        lambda values: 31_536_000 if values["SECURE_SSL_REDIRECT"] else 0,
        "0 or more seconds",
        "",
        shown="`31536000` with the redirect, else `0`",
        least=0,
    ),
    Setting(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        boolean,
        lambda values: bool(values["SECURE_HSTS_SECONDS"]),
        "true or false",
        "",
        shown="`true` when HSTS is on",
    ),
    Setting(
        "SECURE_HSTS_PRELOAD",
        boolean,
        "false",
        "true or false",
        "preloading is hard to undo: your decision",
    ),
    Setting(
        "LOG_LEVEL",
        log_level,
        "INFO",
        "DEBUG, INFO, WARNING, ERROR or CRITICAL",
        "the level of every log record written (the root logger's)",
    ),
    Setting(
        "CREDVAULT_ENV_FILE",
        text,
        None,
        "an existing file, or empty to read none",
        "the settings file read at start-up; set it empty to read none (production)",
        shown="`.env` in `BASE_DIR` (beside `manage.py` in a checkout)",
    ),
    Setting(
        "CREDVAULT_ENVIRONMENT",
        text,
        "production",
        "local or production",
        "`local` in the `.env` that `make run` writes; `check --deploy` fails on it "
        "(credvault.E009)",
    ),
    Setting(
        "CREDVAULT_BIND",
        text,
        "127.0.0.1:8000",
        "HOST:PORT, the port from 1 to 65535",
        "gunicorn's address (`gunicorn.conf.py`), from the environment only, not from `.env`; "
        "`make run` checks it is free first",
    ),
    Setting(
        "WEB_CONCURRENCY",
        whole_number,
        None,
        "at least 1 worker",
        "the number of gunicorn's gevent workers (`gunicorn.conf.py`); 4 on a 2-core machine; "
        "from the environment only, not from `.env`",
        shown="two per usable core (at most 8)",
        least=1,
    ),
    Setting(
        "CREDVAULT_BODY_TIMEOUT",
        number,
        "10",
        "above 0 and at most 300",
        "seconds a request body may take to arrive, in all; then `408 request_timeout` and "
        "nothing is processed (0 < value <= 300)",
        above=0,
        most=300,
        check=Check(id="credvault.E012"),
    ),
)

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


def _what(setting: Setting) -> str:
    if setting.parse is whole_number:
        return f"a whole number, {setting.accepts}"
    if setting.parse is number:
        return f"a number, {setting.accepts}"
    return setting.accepts


def _id(setting: Setting) -> str:
    return f" ({setting.check.id})" if setting.check else ""


def read(environment: Mapping[str, str]) -> dict[str, object]:
    """Every declared setting, typed, from `environment` (unset: its default; a setting without
    one is None). Raises ConfigurationError for the first value that is not of its type."""
    values: dict[str, object] = {}
    for setting in SETTINGS:
        raw = environment.get(setting.name)
        # A number set empty (an unset variable, to some deployment tools) takes its default.
        if raw is None or (not raw.strip() and setting.parse in (whole_number, number)):
            default = setting.default
            values[setting.name] = (
                default(values)
                if callable(default)
                else (None if default is None else setting.parse(default))
            )
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            detail = f": {exc}" if setting.parse is allowed_hosts_text else ""
            if setting.parse is json_text:
                detail = ": it is not valid JSON"
            raise ConfigurationError(
                f"{setting.name} must be {_what(setting)}{detail}{_id(setting)}."
            ) from None
    return values


def problems(values: Values) -> list[tuple[Setting, str]]:
    """(setting, message) for each declared setting whose value is outside its range."""
    found = []
    for setting in SETTINGS:
        message = setting.problem(values.get(setting.name), values)
        if message:
            found.append((setting, message))
    return found


def env_file(environment: Mapping[str, str], *, base_dir: Path) -> Path | None:
    """The settings file to read: CREDVAULT_ENV_FILE (empty: none), else `.env` in base_dir
    when there is one. A named file that does not exist is a ConfigurationError."""
    named = environment.get("CREDVAULT_ENV_FILE")
    if named is None:
        default = base_dir / ".env"
        return default if default.is_file() else None
    if not named:
        return None
    if not Path(named).is_file():
        raise ConfigurationError(
            f"CREDVAULT_ENV_FILE must be {BY_NAME['CREDVAULT_ENV_FILE'].accepts}: "
            f"{named} is not a file."
        )
    return Path(named)


def with_env_file(environment: Mapping[str, str], *, base_dir: Path) -> dict[str, str]:
    """`environment` with the settings file's values under it (the environment wins)."""

    # read_env writes into its class's ENVIRON: a subclass's own dict leaves os.environ alone.
    class Reader(environ.Env):  # type: ignore[misc]  # django-environ ships no types
        ENVIRON: dict[str, str] = {}

    path = env_file(environment, base_dir=base_dir)
    if path is not None:
        Reader.read_env(str(path))
    return {**Reader.ENVIRON, **environment}


def checked(environment: Mapping[str, str]) -> dict[str, object]:
    """Read, type and range-check every setting; stop the process on the first bad one."""
    try:
        values = read(environment)
    except ConfigurationError as error:
        fail(error)
    for setting, message in problems(values):
        fail(ConfigurationError(f"{message.removesuffix('.')}{_id(setting)}."))
    return values


def check_environment(environment: Mapping[str, str]) -> dict[str, object]:
    """`checked` over `environment` and the settings file under it (gunicorn's master)."""
    try:
        merged = with_env_file(environment, base_dir=BASE_DIR)
    except ConfigurationError as error:
        fail(error)
    return checked(merged)


# --- the table of docs/production.md --------------------------------------------------------

TABLE_DOC = BASE_DIR / "docs" / "production.md"
TABLE_START = "<!-- settings-table:start (generated by python -m credvault.configuration) -->"
TABLE_END = "<!-- settings-table:end -->"


def _row(cells: list[str]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def render_table() -> str:
    rows = [_row(["variable", "default", "accepts", "meaning"]), "|---|---|---|---|"]
    for setting in SETTINGS:
        shown = setting.shown or (f"`{setting.default}`" if setting.default else "empty")
        cells = [f"`{setting.name}`", shown, _what(setting), setting.description]
        rows.append(_row(cells))
    return "\n".join(rows) + "\n"


def _between(text: str, start: str, end: str, body: str) -> str:
    """`text` with `body` between its lines `start` and `end` (ValueError without them)."""
    if start not in text or end not in text:
        raise ValueError(f"the markers {start!r} and {end!r} are missing")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    return f"{head}{start}\n{body}{end}{tail}"


def with_table(document: str) -> str:
    return _between(document, TABLE_START, TABLE_END, render_table())


# --- the settings' types, for mypy: a block of credvault/settings.py ------------------------

TYPES_MODULE = BASE_DIR / "credvault" / "settings.py"
TYPES_START = "# settings-types:start (generated by python -m credvault.configuration --write)"
TYPES_END = "# settings-types:end"


def type_of(setting: Setting) -> str:
    """The type of `setting`'s value as its parser declares it, `| None` without a default."""
    returned = get_type_hints(setting.parse)["return"]
    shown = returned.__name__ if isinstance(returned, type) else str(returned)
    return f"{shown} | None" if setting.default is None else shown


def render_types(module: str) -> str:
    """Each declared setting's typed assignment from `_settings`, the values read, but for
    those `module` assigns in its own way."""
    own = set(re.findall(r"^([A-Z][A-Z0-9_]*) = ", module, flags=re.MULTILINE))
    lines = [
        f'{s.name}: {type_of(s)} = _settings["{s.name}"]' for s in SETTINGS if s.name not in own
    ]
    return "\n".join(lines) + "\n"


def with_types(module: str) -> str:
    return _between(module, TYPES_START, TYPES_END, render_types(module))


def main(argv: list[str]) -> int:
    """Print the table, or rewrite it in docs/production.md and the settings' types in
    credvault/settings.py with `--write`; `--check` checks the environment's settings (and its
    settings file's) before gunicorn starts, whose own WEB_CONCURRENCY would be a traceback."""
    if argv not in ([], ["--write"], ["--check"]):
        print("usage: python -m credvault.configuration [--write | --check]", file=sys.stderr)
        return CONFIGURATION_EXIT_STATUS
    if argv == ["--check"]:
        check_environment(os.environ)
        return 0
    if not argv:
        sys.stdout.write(render_table())
        return 0
    TABLE_DOC.write_text(with_table(TABLE_DOC.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the settings table to docs/{TABLE_DOC.name}")
    TYPES_MODULE.write_text(with_types(TYPES_MODULE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the settings' types to credvault/{TYPES_MODULE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
