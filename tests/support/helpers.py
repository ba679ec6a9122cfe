"""Test helpers, one home for every test module (a test module never imports another):
plain functions and constants. Fixtures are in tests/conftest.py; the stand-ins of providers,
real HTTP servers on 127.0.0.1, in tests/support/stand_ins.py.

- the account API: `Api`, `creds`, `marked`, `assert_problem`, the query counts of its writes;
- agents and their calls: `put_agent`, `agent_token`, `read`, `call`;
- OAuth, the account's side: `put_client`, `connect`, `follow`, `consent`, `callback`,
  `connected_github`;
- what is stored: `opened_set`, `store_set`, `agent_with_token`, `CATALOG_ENTRY`;
- a live server: `database_url`, the raw bytes of a store (`raw_store`, `store_body`);
- commands and documents: `manage`, `management_commands`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.test import Client

from services import agents
from services.audit import Actor
from services.credentials import credential_set, store_credentials
from services.crypto import Place
from services.grants import GrantSpec, given_in_list
from services.keys import envelope
from services.masking import Secret
from services.models import Account, AgentToken, ConnectedService
from services.sealed import OpenedSet, SealedKind
from tests.support.harness import server_env
from tests.support.stand_ins import OAuthServer

# --- the account API -------------------------------------------------------------------------

PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def marked(label: str = "value") -> str:
    """A secret that is easy to search for in any output."""
    return f"MARKED-SECRET-{label}-{secrets.token_hex(8)}"


def creds(**values: str) -> list[dict[str, str]]:
    return [{"keyName": name, "value": value} for name, value in values.items()]


class Api:
    """The account API with one token."""

    def __init__(self, client: Client, token: str | None) -> None:
        self.client = client
        self.token = token

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        headers.update(extra or {})
        return headers

    def list(self):
        return self.client.get("/api/v1/services", headers=self.headers())

    def raw(self, method: str, path: str, body: bytes | str = b"", **kwargs: Any):
        content_type = kwargs.pop("content_type", "application/json")
        # The test client leaves out Content-Type for an empty body; a real client does not.
        return self.client.generic(
            method,
            path,
            body,
            content_type=content_type,
            headers=self.headers(kwargs),
            CONTENT_TYPE=content_type,
        )

    def store(self, service: str, credentials: list[dict[str, str]]):
        body = json.dumps({"service": service, "credentials": credentials})
        return self.raw("PUT", "/api/v1/services/credentials", body)

    def test(self, service: str, credentials: list[dict[str, str]]):
        body = json.dumps({"service": service, "credentials": credentials})
        return self.raw("POST", "/api/v1/services/test", body)

    def delete(self, service: str):
        return self.client.delete(f"/api/v1/services/credentials/{service}", headers=self.headers())


# The members a problem adds beside `errors`, by its code.
_APPROVAL = {"approvalId", "approvalUrl", "expiresAt"}
PROBLEM_EXTENSIONS = {
    "verification_failed": {"reason"},
    **{
        code: _APPROVAL
        for code in ("approval_required", "approval_pending", "approval_denied", "approval_expired")
    },
}


def assert_problem(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response["Cache-Control"] == "no-store"
    body = json.loads(response.content)
    assert set(body) >= PROBLEM_KEYS
    extensions = {"errors"} | PROBLEM_EXTENSIONS.get(code, set())
    assert set(body) - PROBLEM_KEYS <= extensions
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["code"] == code
    assert body["title"]
    assert body["detail"]
    assert b"Traceback" not in response.content
    return body


def elapsed(start: float) -> float:
    return time.monotonic() - start


def audit_record_queries() -> int:
    """The audit event of a request that changes nothing: one statement on both databases
    (lock the head, hash, insert, move the head: on SQLite a trigger moves the head)."""
    return 1


def webhook_event_queries() -> int:
    """The webhook event of a change, for an account with no endpoint that takes it: one
    SELECT of the account's enabled endpoints, and nothing written."""
    return 1


def replace_fields_queries() -> int:
    """A replacing store moves the service's row to its next generation, deletes the fields
    whose keyName is not in the new set and writes over or inserts the others: one statement
    on PostgreSQL (writes in a WITH clause), three on SQLite."""
    return 1 if connection.vendor == "postgresql" else 3


def audit_change_queries() -> int:
    """The audit of a change: lock the head first (PostgreSQL: SELECT ... FOR UPDATE; SQLite:
    no statement, the IMMEDIATE transaction holds the lock), then append the event (one
    statement)."""
    return 2 if connection.vendor == "postgresql" else 1


# --- agents and their calls ------------------------------------------------------------------

PROXY_PREFIX = "/api/v1/agent/proxy"


def put_agent(api: Api, name: str, services: list, *, access: str | None = "read"):
    """PUT the agent with `services`; a service named by a string gets a grant of `access`
    (`read` here, for the tests of the plaintext read), or the default grant when None."""
    if access is not None:
        services = [{"service": s, "access": access} if isinstance(s, str) else s for s in services]
    return api.raw("PUT", f"/api/v1/agents/{name}", json.dumps({"services": services}))


def agent_token(api: Api, name: str, body: bytes | str = b"", **kwargs) -> str:
    response = api.raw("POST", f"/api/v1/agents/{name}/tokens", body, **kwargs)
    assert response.status_code == 201, response.content
    return response.json()["token"]


def read(token: str, service: str):
    """The agent read of `service` with the agent token `token`."""
    return Client(raise_request_exception=False).get(
        f"/api/v1/agent/credentials/{service}", headers={"Authorization": f"Bearer {token}"}
    )


def call(token: str, method: str, service: str, path: str = "/", **options):
    """The agent's brokered call. `raw` is the request target as sent (RAW_URI, as gunicorn
    gives it) when it must differ from what the test client makes of `path`."""
    body = options.pop("body", b"")
    headers = {"Authorization": f"Bearer {token}", **options.pop("headers", {})}
    extra = {}
    if "raw" in options:
        extra["RAW_URI"] = options.pop("raw")
    query = options.pop("query", "")
    response = Client(raise_request_exception=False).generic(
        method,
        f"{PROXY_PREFIX}/{service}{path}" + (f"?{query}" if query else ""),
        body,
        content_type=options.pop("content_type", "application/json"),
        headers=headers,
        **extra,
    )
    return read_whole(response) if response.streaming else response


def read_whole(streamed: StreamingHttpResponse) -> HttpResponse:
    """A streamed answer read to its end, as an agent reads it (so that the call ends: its
    audit event written, its connection given back), as a whole response with its status
    and headers. The test client leaves a streamed body unread."""
    body = b"".join(streamed.streaming_content)
    whole = HttpResponse(body, status=streamed.status_code)
    for name, value in streamed.items():
        whole[name] = value
    whole.json = lambda **kwargs: json.loads(body, **kwargs)
    whole.streamed = True
    return whole


# --- OAuth, the account's side ---------------------------------------------------------------

# credvault's public URL while the OAuth stand-in (the `stand_in` fixture) plays the provider.
PUBLIC_URL = "http://testserver"
CLIENT_ID = "client-id-1"


def put_client(api: Api, provider: str, secret: str, client_id: str = CLIENT_ID):
    body = json.dumps({"clientId": client_id, "clientSecret": secret})
    return api.raw("PUT", f"/api/v1/oauth-clients/{provider}", body)


def connect(api: Api, provider: str = "github", body: dict | None = None):
    return api.raw("POST", f"/api/v1/connect/{provider}", json.dumps(body) if body else b"")


def follow(link: str) -> tuple[str, str]:
    """A person's browser opens a connect's link (credvault's start page) and continues from
    it (the page's form, posted from the page itself): where the browser is sent (the
    provider's authorization URL), and the cookie it now holds, as `name=value`."""
    browser = Client(raise_request_exception=False)
    assert link.startswith(f"{PUBLIC_URL}/oauth/start/"), link
    path = urlsplit(link).path
    page = browser.get(path)
    assert page.status_code == 200, page.content
    continued = browser.post(path, headers={"Sec-Fetch-Site": "same-origin"})
    assert continued.status_code == 303, continued.content
    [(name, morsel)] = continued.cookies.items()
    return continued["Location"], f"{name}={morsel.value}"


def consent(stand_in: OAuthServer, url: str, *, cookie: str = "") -> dict[str, str]:
    """The person consents: what the provider sends the browser back with, as its consent
    page's link holds it (`state`, `code`), and the `cookie` the browser brings along. `url` is
    the connect's link (followed first), or the provider's authorization URL that `follow`
    gave, with its `cookie`."""
    if not url.startswith(f"{stand_in.url}/"):
        url, cookie = follow(url)
    assert url.startswith(f"{stand_in.url}/authorize?")
    with urllib.request.urlopen(url) as answer:
        text = answer.read().decode()
    link = text.split('href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    return {**{k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}, "cookie": cookie}


def callback(*, cookie: str = "", **params: str):
    """The provider's redirect to the callback, from a browser holding `cookie` (`name=value`;
    none when empty)."""
    browser = Client(raise_request_exception=False)
    if cookie:
        name, value = cookie.split("=", 1)
        browser.cookies[name] = value
    return browser.get("/oauth/callback", params)


def connected_github(alice_api: Api, stand_in: OAuthServer) -> str:
    """A whole connect: the set stored as `github`; the page's text."""
    url = connect(alice_api).json()["authorizeUrl"]
    page = callback(**consent(stand_in, url))
    assert page.status_code == 200, page.content
    return page.content.decode()


# --- what is stored --------------------------------------------------------------------------


def opened_set(service: ConnectedService) -> dict[str, str]:
    """The stored set of `service`, each field opened: {keyName: value}."""
    return {
        field.key_name: envelope.open(
            field.key_id,
            field.ciphertext,
            Place(service.account_id, service.service, field.key_name, service.generation),
            field_id=field.pk,
        ).reveal()
        for field in service.fields.all()
    }


def seal_before_data_keys(key: str, key_id: str, value: str, place: Place) -> bytes:
    """`value` as a value sealed before data keys was stored (format 1): sealed directly by a
    ring key (`key`, base64, named `key_id`), bound to `place` and to that key id."""
    nonce = os.urandom(12)
    aad = [1, key_id, place.account_id, place.service, place.key_name, place.generation]
    associated = json.dumps(aad, separators=(",", ":")).encode("ascii")
    sealed = AESGCM(base64.b64decode(key)).encrypt(nonce, value.encode(), associated)
    return bytes([1]) + nonce + sealed


def reseal_before_data_keys(kind: SealedKind, row: Any, *, key: str, key_id: str) -> None:
    """Store `row`'s value of `kind` again as it was stored before data keys: sealed directly
    by the ring key `key_id`."""
    value = kind.open(row).reveal()
    blob = seal_before_data_keys(key, key_id, value, kind.place(row))
    kind.model._default_manager.filter(pk=row.pk).update(key_id=key_id, **{kind.ciphertext: blob})


def store_set(account: Account, service: str, **values: str) -> None:
    """Store `values` as `account`'s `service`, as a management command does: no request."""
    fields = OpenedSet((name, Secret(value)) for name, value in values.items())
    store_credentials(
        actor=Actor.command(account.pk),
        credentials=credential_set(service=service, fields=fields),
    )


def agent_with_token(account: Account, name: str, services: list[str]) -> AgentToken:
    """`account`'s agent `name` with the default grant on each of `services`, and a token."""
    actor = Actor.command(account.pk)
    agents.put_agent(actor=actor, name=name, services=given_in_list(map(GrantSpec, services)))
    return agents.issue_agent_token(actor=actor, name=name).issued.token


# A valid catalog entry, as catalog.toml spells one: `example`, its api_key checked at /me.
CATALOG_ENTRY = """
[[providers]]
id = "example"
name = "Example"
category = "developer"
base_url = "https://api.example.com"
sensitive_none = "The example API has no endpoint that creates a credential (https://docs.example.com/api)."
[[providers.shapes]]
key_type = "api_key"
required = ["api_key"]
[providers.shapes.check]
method = "GET"
path = "/me"
auth = { type = "bearer", field = "api_key" }
docs = "https://docs.example.com/me"
"""


# --- a live server ---------------------------------------------------------------------------


def database_url() -> str:
    """The URL of the test database, for a server process started by the test."""
    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


STORE_PATH = "/api/v1/services/credentials"


def raw_store(token: str, body: bytes, *, length: int | None = None, extra: str = "") -> bytes:
    """A store request as bytes on the wire: `PUT STORE_PATH` declaring `length` (the body's
    own by default), with the `extra` header lines."""
    declared = len(body) if length is None else length
    return (
        f"PUT {STORE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n{extra}\r\n"
    ).encode() + body


def store_body(service: str) -> bytes:
    return json.dumps({"service": service, "credentials": creds(api_key="v")}).encode()


# --- commands and documents ------------------------------------------------------------------


def manage(*args: str, **env: str | None) -> subprocess.CompletedProcess:
    """Run manage.py as a user would, for the exit code. A variable given as None is unset
    (this process's environment holds what it read from `.env`)."""
    full_env = {name: value for name, value in {**os.environ, **env}.items() if value is not None}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=Path(settings.BASE_DIR),
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# The programs that run a management command, as the documents spell them.
COMMAND_RUNNERS = r"(?:manage\.py|django-admin|credvault-manage|-m django|-m credvault\.manage)"


def shell_blocks(markdown: str) -> list[str]:
    return re.findall(r"^ *```sh\n(.*?)^ *```", markdown, re.MULTILINE | re.DOTALL)


def shell_commands(markdown: str) -> list[str]:
    """Each command line of the sh blocks (continuations joined, comments dropped), and each
    inline code span of the prose."""
    lines = []
    for block in shell_blocks(markdown):
        for line in block.replace("\\\n", " ").splitlines():
            lines.append(re.sub(r"(^|\s)#.*", "", line).strip())
    prose = re.sub(r"^ *```.*?^ *```", "", markdown, flags=re.MULTILINE | re.DOTALL)
    lines.extend(re.findall(r"`([^`\n]+)`", prose))
    return [line for line in lines if line]


def management_commands(markdown: str) -> list[tuple[str, str]]:
    """(command name, the line naming it) for every management command run in `markdown`."""
    found = []
    for line in shell_commands(markdown):
        for name in re.findall(COMMAND_RUNNERS + r"\s+([^\s;|&)`]+)", line):
            # Not a placeholder (`django-admin COMMAND`), nor a path the program is copied to.
            if not name.isupper() and not name.startswith("/"):
                found.append((name, line))
    return found


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, and the key, written as PEM files in
    `directory`: for a test's server that must speak https (a client that calls https only),
    and for that test's client to trust."""
    from datetime import UTC, datetime, timedelta
    from ipaddress import ip_address

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def served_env(provider_urls: dict[str, str], **settings: str) -> dict[str, str]:
    """The environment of credvault under gunicorn for a test: the test database and keys,
    each service of `provider_urls` (service to URL) pointed at its stand-in, and `settings`
    besides."""
    from tests.conftest import TEST_AUDIT_KEYS, TEST_KEYS

    return server_env(
        database_url(),
        CREDVAULT_ENCRYPTION_KEYS=TEST_KEYS,
        CREDVAULT_AUDIT_KEYS=TEST_AUDIT_KEYS,
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps(provider_urls),
        **settings,
    )


@contextmanager
def killed_at_the_second_batch(monkeypatch, module: Any, name: str) -> Iterator[None]:
    """`module.name`, a command's batch function, raising KeyboardInterrupt at its second
    call (a command killed in the middle) within the block, and itself again after it."""
    real = getattr(module, name)
    batches = {"n": 0}

    def killed(*args: Any, **kwargs: Any) -> Any:
        batches["n"] += 1
        if batches["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, killed)
    try:
        yield
    finally:
        monkeypatch.setattr(module, name, real)


def opened_values() -> dict[tuple[str, str | int], str]:
    """Every stored value of every sealed kind, opened afresh (the cache of data keys
    emptied first): {(kind, row id): value}."""
    from services.keys import data_keys
    from services.sealed import KINDS

    data_keys.cache.clear()
    return {
        (kind.name, row.pk): kind.open(row).reveal()
        for kind in KINDS
        for row in kind.model._default_manager.select_related(*kind.related)
    }
