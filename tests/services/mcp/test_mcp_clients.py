"""The MCP server driven by real clients, against credvault under gunicorn as `make run` serves
it (docs/mcp.md): the official `mcp` Python SDK's client, in its current mode (the 2026-07-28
revision, found with `server/discover`) and its legacy mode (the `initialize` handshake), and
the MCP Inspector's command line (`@modelcontextprotocol/inspector` 2.x, `--cli`), installed
from npm into var/inspector by this module when it is not there yet.

Each client is configured as docs/mcp.md says: the URL `{credvault}/mcp` and the agent token in
`Authorization`. The provider is a stand-in on 127.0.0.1 that checks it received the stored
credential; a marked secret it echoes never reaches a client."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator

import httpx2
import pytest
import urllib3
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.models import AuditEvent
from tests.support.harness import BASE_DIR, Gunicorn
from tests.support.helpers import agent_token, creds, marked, put_agent, served_env
from tests.support.stand_ins import ProviderServer

MIB = 1024 * 1024
INSPECTOR_DIR = BASE_DIR / "var" / "inspector"
# The Inspector 2.x needs Node 22.19 or later: the `node` package from npm brings one, whatever
# the machine's own Node is.
INSPECTOR_PACKAGES = ("@modelcontextprotocol/inspector@^2.12", "node@22")

# It writes var/inspector, which the demo's test watches: one worker runs these modules in turn.
# slow: the real MCP clients (the SDK, the Inspector from npm) against gunicorn.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("var"),
]


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    server = ProviderServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, provider) -> Iterator[Gunicorn]:
    """credvault under gunicorn (two workers: no request depends on which one answers the last)
    with github pointed at the stand-in, its public URL its own address."""

    env = served_env({"github": provider.url})
    server = Gunicorn(env, workers=2)
    server.env["CREDVAULT_PUBLIC_URL"] = server.url
    with server:
        yield server


@pytest.fixture
def agent(alice_api, provider, credvault) -> tuple[str, str]:
    """Alice's github set (a marked value), her agent `bot` granted it to call and to read,
    and the agent's token."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access="read").status_code == 201
    provider.requests.clear()
    return value, agent_token(alice_api, "bot")


def connect(server: Gunicorn, token: str, mode: str) -> Client:
    """The official client as docs/mcp.md configures it: the URL and the agent token."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode=mode)


async def _session(server: Gunicorn, token: str, mode: str, steps):
    async with connect(server, token, mode) as client:
        return await steps(client)


def run(server: Gunicorn, token: str, mode: str, steps):
    return asyncio.run(_session(server, token, mode, steps))


# Each revision as the official client speaks it: its current mode finds 2026-07-28 with
# `server/discover`; its legacy mode sends `initialize` for 2025-11-25, or for 2025-06-18 when
# the client is told that is the newest it knows (as a client of that revision's time is).
REVISIONS = {
    "2026-07-28": "auto",
    "2025-11-25": "legacy",
    "2025-06-18": "legacy",
}


@pytest.fixture(params=list(REVISIONS))
def revision(request, monkeypatch) -> tuple[str, str]:
    """A protocol revision and the client mode that speaks it."""
    version = request.param
    if version == "2025-06-18":
        monkeypatch.setattr("mcp.client.session.LATEST_HANDSHAKE_VERSION", version)
    return version, REVISIONS[version]


def _call(service: str, method: str, path: str, **rest) -> dict:
    return {"service": service, "method": method, "path": path, **rest}


def _proxy_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="agent.proxy").order_by("seq"))


def test_each_revision_lists_and_calls(agent, provider, credvault, revision):
    """Negotiation, the tool list, list_services, a GET and a POST through call_api: the
    provider gets the stored credential, never the agent token; an echoed secret comes back
    [REDACTED]; one audit event per call, via mcp."""
    value, token = agent
    version, mode = revision
    provider.answer(200, {"login": "octo", "echo": value})

    async def steps(client: Client):
        tools = await client.list_tools()
        services = await client.call_tool("list_services", {})
        read = await client.call_tool("call_api", _call("github", "GET", "/user"))
        provider.answer(201, {"number": 7})
        created = await client.call_tool(
            "call_api", _call("github", "POST", "/repos/o/r/issues", body={"title": "t"})
        )
        return client.protocol_version, tools, services, read, created

    negotiated, tools, services, read, created = run(credvault, token, mode, steps)
    assert negotiated == version
    assert [tool.name for tool in tools.tools] == ["list_services", "call_api"]
    assert "github (GitHub)" in tools.tools[1].description
    (entry,) = services.structured_content["services"]
    assert (entry["service"], entry["provider"], entry["callable"]) == ("github", "GitHub", True)
    assert read.is_error is False
    assert read.structured_content["status"] == 200
    assert json.loads(read.structured_content["body"]) == {"login": "octo", "echo": "[REDACTED]"}
    assert json.loads(read.content[0].text) == read.structured_content
    assert created.structured_content["status"] == 201
    get, post = provider.requests[-2:]
    assert (get.method, get.path, post.method, post.path) == (
        "GET",
        "/user",
        "POST",
        "/repos/o/r/issues",
    )
    assert json.loads(post.body) == {"title": "t"}
    for sent in (get, post):
        assert sent.headers["Authorization"] == f"Bearer {value}"
        assert token not in json.dumps(sent.headers)
    events = _proxy_events()
    assert [(e.method, e.path, e.upstream_status, e.via) for e in events] == [
        ("GET", "/user", 200, "mcp"),
        ("POST", "/repos/o/r/issues", 201, "mcp"),
    ]


def test_refusals_binary_and_cut_answers(agent, alice_api, provider, credvault):
    """A call outside the grant is a tool error with the problem's code, nothing sent; a binary
    answer comes as base64; an answer past CREDVAULT_MCP_MAX_RESULT (256 KiB) is cut there,
    `truncated`, and its event says `cut`."""
    _, token = agent
    grant = [{"service": "github", "methods": ["GET"], "paths": ["/user", "/files"]}]
    assert put_agent(alice_api, "bot", grant).status_code == 200
    image = bytes(range(256)) * 4

    async def steps(client: Client):
        refused = await client.call_tool("call_api", _call("github", "DELETE", "/user"))
        outside = await client.call_tool("call_api", _call("github", "GET", "/orgs/x"))
        provider.answer(200, image, headers={"Content-Type": "image/png"})
        binary = await client.call_tool("call_api", _call("github", "GET", "/files/a.png"))
        provider.answer(200, b"", headers={"Content-Type": "text/plain"}, generated_bytes=MIB)
        cut = await client.call_tool("call_api", _call("github", "GET", "/files/big"))
        return refused, outside, binary, cut

    refused, outside, binary, cut = run(credvault, token, "auto", steps)
    for result, detail in ((refused, "method"), (outside, "path")):
        assert result.is_error is True
        error = result.structured_content["error"]
        assert (error["status"], error["code"]) == (403, "not_granted")
        assert detail in error["detail"]
    assert binary.structured_content["bodyEncoding"] == "base64"
    assert base64.b64decode(binary.structured_content["body"]) == image
    assert cut.structured_content["truncated"] is True
    assert len(cut.structured_content["body"]) == 256 * 1024
    assert [request.path for request in provider.requests] == ["/files/a.png", "/files/big"]
    events = _proxy_events()
    assert [(e.status, e.outcome, e.via) for e in events] == [
        (403, "refused", "mcp"),
        (403, "refused", "mcp"),
        (200, "success", "mcp"),
        (200, "cut", "mcp"),
    ]


def test_revocation_takes_effect_on_the_very_next_call(
    agent, alice_api, provider, credvault, monkeypatch
):
    """A grant taken away and then the token revoked, within one client session: the next call
    is refused each time."""
    _, token = agent
    provider.answer(200, {"ok": True})
    # The account's own API is called from inside the client's event loop, between two calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    async def steps(client: Client):
        first = await client.call_tool("call_api", _call("github", "GET", "/user"))
        assert put_agent(alice_api, "bot", []).status_code == 200
        ungranted = await client.call_tool("call_api", _call("github", "GET", "/user"))
        revoked = alice_api.raw("DELETE", f"/api/v1/agents/bot/tokens/{token[:12]}")
        assert revoked.status_code == 204
        with pytest.raises(MCPError):
            await client.call_tool("list_services", {})
        return first, ungranted

    first, ungranted = run(credvault, token, "auto", steps)
    assert first.is_error is False
    assert ungranted.structured_content["error"]["code"] == "not_granted"
    assert len(provider.requests) == 1


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The Inspector's command line (`node .../mcp-inspector --cli`), installed from npm into
    var/inspector when it is not there yet. Without npm the tests skip, but in CI
    (CREDVAULT_REQUIRE_SERVICES=1), where its absence is a failure."""
    launcher = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
    node = INSPECTOR_DIR / "node_modules" / ".bin" / "node"
    if not (launcher.exists() and node.exists()):
        npm = shutil.which("npm")
        if npm is None:
            message = "npm is not installed: the MCP Inspector cannot be installed"
            if os.environ.get("CREDVAULT_REQUIRE_SERVICES") == "1":
                pytest.fail(message)
            pytest.skip(message)
        INSPECTOR_DIR.mkdir(parents=True, exist_ok=True)
        install = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(INSPECTOR_DIR)]
        subprocess.run(
            [*install, *INSPECTOR_PACKAGES],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return [str(node), str(launcher), "--cli"]


# The Inspector's exit status for a tool result with `isError: true` (it prints the result).
TOOL_ERROR_STATUS = 5


def inspect(inspector: list[str], server: Gunicorn, token: str, *args: str, status: int = 0):
    """One Inspector command against credvault's MCP server, which must exit with `status`:
    its JSON output, or, when it printed none, its error output as text."""
    done = subprocess.run(
        [
            *inspector,
            f"{server.url}/mcp",
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {token}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(INSPECTOR_DIR)},
    )
    assert done.returncode == status, done.stderr + done.stdout
    try:
        return json.loads(done.stdout)
    except ValueError:
        return done.stderr + done.stdout


def call_api(inspector: list[str], server: Gunicorn, token: str, *arguments: str, status=0):
    """`call_api` through the Inspector, its arguments as `name=value`."""
    tool = ("--method", "tools/call", "--tool-name", "call_api", "--tool-arg", *arguments)
    return inspect(inspector, server, token, *tool, status=status)


def test_inspector_lists_and_calls(agent, alice_api, provider, credvault, inspector):
    """The Inspector's CLI as a developer runs it against the URL and the token: the tool list
    names the agent's service, list_services and call_api answer, an echoed secret comes back
    [REDACTED], a call outside the grant is a tool error, and a bad token is refused."""
    value, token = agent
    listed = inspect(inspector, credvault, token, "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == ["list_services", "call_api"]
    assert "github (GitHub)" in listed["tools"][1]["description"]
    services = inspect(
        inspector, credvault, token, "--method", "tools/call", "--tool-name", "list_services"
    )
    assert services["structuredContent"]["services"][0]["service"] == "github"
    provider.answer(200, {"login": "octo", "echo": value})
    called = call_api(inspector, credvault, token, "service=github", "method=GET", "path=/user")
    assert called["isError"] is False
    assert json.loads(called["structuredContent"]["body"]) == {
        "login": "octo",
        "echo": "[REDACTED]",
    }
    assert provider.requests[-1].headers["Authorization"] == f"Bearer {value}"
    refused = call_api(
        inspector,
        credvault,
        token,
        "service=slack",
        "method=GET",
        "path=/auth.test",
        status=TOOL_ERROR_STATUS,
    )
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"]["code"] == "not_granted"
    for output in (listed, services, called, refused):
        assert value not in json.dumps(output)
    assert [e.via for e in _proxy_events()] == ["mcp", "mcp"]
    # A bad token: the Inspector reads the 401 as authorization needed, and shows the problem.
    unauthorized = inspect(
        inspector, credvault, "cva_bad", "--method", "tools/list", "--stored-auth-only", status=3
    )
    error = json.loads(unauthorized)["error"]
    assert error["code"] == "auth_required"
    assert "invalid_token" in error["message"]


def _post(server: Gunicorn, token: str | None, body: bytes, **headers: str):
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return urllib3.request(
        "POST", f"{server.url}/mcp", body=body, headers={**sent, **headers}, retries=False
    )


def test_http_refusals_and_json_rpc_errors(agent, alice_account_and_token, credvault):
    """What a client meets before any tool, on the live server: 401 naming the RFC 9728
    document, that document, 403 for an account token, 405 for GET, 413 past 1 MiB, 403 for
    another Origin, and the JSON-RPC errors with each revision's status."""
    _, token = agent
    tools_list = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    for bad in (None, "cva_bad"):
        refused = _post(credvault, bad, tools_list)
        assert refused.status == 401
        assert refused.headers["WWW-Authenticate"].startswith(
            f'Bearer realm="credvault", resource_metadata="{credvault.url}'
            '/.well-known/oauth-protected-resource/mcp"'
        )
    document = urllib3.request(
        "GET", f"{credvault.url}/.well-known/oauth-protected-resource/mcp"
    ).json()
    assert document["resource"] == f"{credvault.url}/mcp"
    account = _post(credvault, alice_account_and_token[1], tools_list)
    assert (account.status, account.json()["code"]) == (403, "insufficient_scope")
    got = urllib3.request(
        "GET", f"{credvault.url}/mcp", headers={"Authorization": f"Bearer {token}"}
    )
    assert (got.status, got.headers["Allow"]) == (405, "POST")
    assert _post(credvault, token, b" " * (MIB + 1)).status == 413
    assert _post(credvault, token, tools_list, Origin="http://evil.example").status == 403
    assert _post(credvault, token, tools_list, Origin=credvault.url).status == 200
    modern = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "nope"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    cases = [
        (b"{not json", {}, -32700, 400),
        (b'{"jsonrpc": "2.0", "id": 1}', {}, -32600, 400),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "nope"}', {}, -32601, 200),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 1}}',
            {},
            -32602,
            200,
        ),
        (
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "nope", "params": {"_meta": meta}}
            ).encode(),
            modern,
            -32601,
            404,
        ),
    ]
    for body, headers, code, status in cases:
        answer = _post(credvault, token, body, **headers)
        assert (answer.status, answer.json()["error"]["code"]) == (status, code), body
