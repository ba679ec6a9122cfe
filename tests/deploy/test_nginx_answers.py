"""Headers meant for credvault or its proxy are the provider's no more: a provider's
`X-Credvault-*` and `X-Accel-*` headers are removed from its answer, and the shipped nginx
configuration (deploy/nginx.conf) obeys no `X-Accel-*` header of an answer either, while a
streamed answer still passes through it piece by piece.

The provider is a stand-in on 127.0.0.1 (tests/support/sdk_stand_ins.py, `ProxyHeadersStandIn`) that
answers `X-Accel-Redirect` to an internal location of the shipped configuration and
`X-Credvault-Error: spoof`. The live tests run real nginx (`/usr/sbin/nginx`; skipped, with a
message, where it is absent, but in CI) with the shipped file, only its addresses and
certificate changed, in front of credvault under gunicorn, and in front of the stand-in itself
(as if credvault passed the headers on)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
from django.test import Client

from services.models import AuditEvent
from tests.support.harness import BASE_DIR, Gunicorn, free_port
from tests.support.helpers import agent_token, creds, marked, put_agent, served_env
from tests.support.sdk_stand_ins import ProxyHeadersStandIn

NGINX_CONF = BASE_DIR / "deploy" / "nginx.conf"
HOST = "vault.example.com"
PROXIED = "/api/v1/agent/proxy/github"
# nginx's certificate is a throwaway self-signed one.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


def foreign(headers) -> dict[str, str]:
    """The answer's headers meant for credvault or its proxy, by lower-case name."""
    return {
        name.lower(): value
        for name, value in headers.items()
        if name.lower().startswith(("x-accel-", "x-credvault-error"))
        or value == "spoofed"
        or value == "spoof"
    }


# --- credvault drops them -------------------------------------------------------------------


@pytest.fixture
def stand_in(settings) -> Iterator[ProxyHeadersStandIn]:
    value = marked("gh")
    server = ProxyHeadersStandIn(value).start()
    settings.CREDVAULT_PROVIDER_BASE_URLS = json.dumps({"github": server.url})
    yield server
    server.stop()


@pytest.fixture
def bot(alice_api, stand_in) -> str:
    assert alice_api.store("github", creds(api_key=stand_in.credential)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    return agent_token(alice_api, "bot")


@pytest.mark.django_db
def test_credvault_drops_the_providers_headers_meant_for_others(bot, stand_in):
    response = Client().get(f"{PROXIED}/accel", headers={"Authorization": f"Bearer {bot}"})
    assert response.status_code == 200
    assert json.loads(response.content) == ProxyHeadersStandIn.BODY
    assert foreign(response.headers) == {}
    assert response["X-Credvault-Request-Id"] != "spoofed"
    assert response["X-Provider-Own"] == "kept"
    [sent] = stand_in.requests
    assert sent.path == "/accel"
    event = AuditEvent.objects.get(action="agent.proxy")
    assert (event.status, event.upstream_status) == (200, 200)


@pytest.mark.django_db
def test_a_streamed_answer_keeps_credvaults_own_buffering_header_only(bot, stand_in):
    stand_in.gate.set()
    response = Client().get(f"{PROXIED}/stream", headers={"Authorization": f"Bearer {bot}"})
    body = b"".join(response.streaming_content)
    assert response.status_code == 200
    assert b'data: {"n":3}' in body
    # credvault's own, for an nginx that obeys it; never the provider's `yes`.
    assert response["X-Accel-Buffering"] == "no"
    assert response.get("X-Credvault-Error") is None
    assert response.get("X-Accel-Redirect") is None


@pytest.mark.django_db
def test_call_api_results_hold_none_of_them(bot, stand_in):
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "call_api",
            "arguments": {"service": "github", "method": "GET", "path": "/accel"},
        },
    }
    response = Client().post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={"Authorization": f"Bearer {bot}", "MCP-Protocol-Version": "2025-11-25"},
    )
    result = response.json()["result"]["structuredContent"]
    assert result["status"] == 200
    assert foreign(result["headers"]) == {}
    assert result["headers"]["x-provider-own"] == "kept"


# --- nginx as shipped -----------------------------------------------------------------------


def _nginx() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if found is None or shutil.which("openssl") is None:
        message = "nginx or openssl is not installed (apt-get install nginx openssl)"
        if os.environ.get("CREDVAULT_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


class Nginx:
    """nginx with the shipped server block, listening on free loopback ports, its upstream
    the given port; every file it writes in `directory`."""

    def __init__(self, binary: str, directory: Path, upstream_port: int) -> None:
        self.binary, self.directory = binary, directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.access_log = directory / "access.log"
        cert, key = directory / "credvault.crt", directory / "credvault.key"
        subject = ["-subj", f"/CN={HOST}", "-keyout", str(key), "-out", str(cert)]
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject],
            capture_output=True,
            check=True,
            timeout=60,
        )
        site = NGINX_CONF.read_text(encoding="utf-8")
        for shipped, local in (
            ("/etc/nginx/tls/credvault.crt", str(cert)),
            ("/etc/nginx/tls/credvault.key", str(key)),
            ("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};"),
            ("listen 443 ssl;", f"listen 127.0.0.1:{self.port} ssl;"),
            ("listen 80;", f"listen 127.0.0.1:{free_port()};"),
            ("listen [::]:443 ssl;", ""),
            ("listen [::]:80;", ""),
            ("/var/log/nginx/access.log", str(self.access_log)),
        ):
            assert shipped in site, shipped
            site = site.replace(shipped, local)
        (directory / "credvault.conf").write_text(site, encoding="utf-8")
        (directory / "nginx.conf").write_text(
            f"pid {directory}/nginx.pid;\n"
            f"error_log {directory}/error.log;\n"
            "daemon off;\n"
            "worker_processes 1;\n"
            "events {}\n"
            "http {\n"
            "    access_log off;\n"
            + "".join(
                f"    {kind}_temp_path {directory}/{kind};\n"
                for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
            )
            + f"    include {directory}/credvault.conf;\n"
            "}\n",
            encoding="utf-8",
        )

    def __enter__(self) -> Nginx:
        command = [self.binary, "-p", str(self.directory), "-e", str(self.directory / "error.log")]
        self.process = subprocess.Popen(
            [*command, "-c", str(self.directory / "nginx.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            if self.process.poll() is not None:
                log = (self.directory / "error.log").read_text(errors="replace")
                raise RuntimeError(f"nginx exited: {log}")
            try:
                self.request("GET", "/healthz", timeout=1.0)
                return self
            except urllib3.exceptions.HTTPError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("nginx did not answer")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, **options) -> urllib3.BaseHTTPResponse:
        pool = urllib3.PoolManager(cert_reqs="CERT_NONE", assert_hostname=False)
        headers = {"Host": HOST, **options.pop("headers", {})}
        return pool.request(
            method, self.url + path, headers=headers, retries=False, redirect=False, **options
        )


@pytest.fixture(scope="module")
def live_stand_in() -> Iterator[ProxyHeadersStandIn]:
    server = ProxyHeadersStandIn(marked("gh")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, live_stand_in) -> Iterator[Gunicorn]:

    env = served_env(
        {"github": live_stand_in.url},
        ALLOWED_HOSTS=f"127.0.0.1,localhost,{HOST}",
        SECURE_PROXY_SSL_HEADER="true",
        CREDVAULT_PUBLIC_URL=f"https://{HOST}",
    )
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def live_bot(alice_api, live_stand_in, credvault) -> str:
    assert alice_api.store("github", creds(api_key=live_stand_in.credential)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    live_stand_in.reset()
    return agent_token(alice_api, "bot")


@pytest.mark.django_db(transaction=True)
def test_through_nginx_the_agent_gets_the_providers_answer(
    live_bot, live_stand_in, credvault, tmp_path
):
    """nginx → credvault → the provider: the provider's body, not the redirect's target (the
    413 problem of /_credvault/413), and no spoofed header."""
    with Nginx(_nginx(), tmp_path, credvault.port) as nginx:
        answer = nginx.request(
            "GET", f"{PROXIED}/accel", headers={"Authorization": f"Bearer {live_bot}"}
        )
    assert answer.status == 200, answer.data
    assert json.loads(answer.data) == ProxyHeadersStandIn.BODY
    assert foreign(answer.headers) == {}
    assert answer.headers["X-Provider-Own"] == "kept"
    assert answer.headers["X-Credvault-Request-Id"] != "spoofed"
    assert [sent.path for sent in live_stand_in.requests] == ["/accel"]


@pytest.mark.django_db(transaction=True)
def test_through_nginx_a_stream_passes_piece_by_piece(live_bot, live_stand_in, credvault, tmp_path):
    """The first event reaches the agent while the provider still holds the second: nginx
    buffers no brokered answer, although it obeys no X-Accel-Buffering. Without that, the read
    of the first event would wait for the gate, which only opens after it."""
    with Nginx(_nginx(), tmp_path, credvault.port) as nginx:
        answer = nginx.request(
            "GET",
            f"{PROXIED}/stream",
            headers={"Authorization": f"Bearer {live_bot}"},
            preload_content=False,
            timeout=urllib3.Timeout(connect=5, read=20),
        )
        assert answer.status == 200
        received = b""
        while b'data: {"n":1}' not in received:
            piece = answer.read1(65536)
            assert piece, received
            received += piece
        assert not live_stand_in.gate.is_set()
        assert len(live_stand_in.sent_at) == 1  # the provider has written the first event only
        live_stand_in.gate.set()
        rest = answer.read()
    assert b'data: {"n":2}' in rest
    assert b'data: {"n":3}' in rest
    assert foreign(answer.headers) == {}


@pytest.mark.django_db(transaction=True)
def test_nginx_itself_obeys_no_x_accel_header_of_an_answer(live_stand_in, tmp_path):
    """The shipped configuration in front of an upstream that passes the headers on (the
    stand-in itself in credvault's place): nginx does not follow the redirect, and passes on
    none of the X-Accel-* headers; credvault's own X-Credvault-* headers pass, as they must."""
    live_stand_in.reset()
    with Nginx(_nginx(), tmp_path, int(live_stand_in.url.rsplit(":", 1)[1])) as nginx:
        answer = nginx.request(
            "GET",
            f"{PROXIED}/accel",
            headers={"Authorization": f"Bearer {live_stand_in.credential}"},
        )
    assert answer.status == 200, answer.data
    assert json.loads(answer.data) == ProxyHeadersStandIn.BODY
    assert not [name for name in answer.headers if name.lower().startswith("x-accel-")]
    assert answer.headers["X-Credvault-Error"] == "spoof"  # credvault's to drop, above


@pytest.mark.django_db(transaction=True)
def test_nginx_logs_no_token_of_a_url(live_bot, live_stand_in, credvault, tmp_path):
    """Telegram's SDK puts the agent token in the path, a careless one in the query: nginx's
    access log withholds both (credvault refuses the second, and logs neither)."""
    with Nginx(_nginx(), tmp_path, credvault.port) as nginx:
        in_path = nginx.request("GET", f"/api/v1/agent/proxy/telegram/bot{live_bot}/getMe")
        in_query = nginx.request(
            "GET",
            f"{PROXIED}/accel?key={live_bot}&again=cva%5F{live_bot[4:]}",
            headers={"Authorization": f"Bearer {live_bot}"},
        )
    assert in_path.status == 403  # no grant on telegram: refused, but the token was read
    assert in_query.status == 400
    assert json.loads(in_query.data)["code"] == "agent_token_in_request"
    logged = nginx.access_log.read_text()
    assert live_bot[4:] not in logged
    assert "/api/v1/agent/proxy/telegram/botcva_.../getMe" in logged
    assert "/accel?key=cva_...&again=cva_..." in logged
    assert live_stand_in.requests == []


@pytest.mark.django_db(transaction=True)
def test_nginx_logs_no_sign_in_link(alice, credvault, tmp_path):
    """A member's one-time link holds its secret in its path: nginx logs the path without it."""
    from services.members import create_member

    secret = create_member(account=alice, email="person@example.com").url.rsplit("/", 1)[1]
    with Nginx(_nginx(), tmp_path, credvault.port) as nginx:
        opened = nginx.request("GET", f"/account/sign-in/{secret}?from=mail")
    assert opened.status == 200
    assert b"person@example.com" in opened.data
    logged = nginx.access_log.read_text()
    assert secret not in logged
    assert "/account/sign-in/...?from=mail" in logged
