"""The second penetration test's MCP requests against credvault under gunicorn as `make run`
serves it: with the official `mcp` client where it can make the request (a method override
spelled with underscores in call_api's `headers`, a header that is no header, an agent token in
the arguments), and raw HTTP where no client would (a lone surrogate in the arguments, an
`MCP-Protocol-Version` header that disagrees with the body). Each refused as a tool error or a
JSON-RPC error, never a 500, and nothing reaches the provider stand-in on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx2
import pytest
import urllib3
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.models import AuditEvent
from tests.support.harness import Gunicorn
from tests.support.helpers import agent_token, creds, marked, put_agent, served_env
from tests.support.stand_ins import ProviderServer

# slow: the real `mcp` client against gunicorn.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    server = ProviderServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, provider) -> Iterator[Gunicorn]:

    env = served_env({"github": provider.url})
    server = Gunicorn(env, workers=1)
    server.env["CREDVAULT_PUBLIC_URL"] = server.url
    with server:
        yield server


@pytest.fixture
def token(alice_api, provider, credvault) -> str:
    """Alice's github set, her agent `bot` granted GET only; the agent's token."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    grant = [{"service": "github", "methods": ["GET"]}]
    assert put_agent(alice_api, "bot", grant).status_code == 201
    provider.requests.clear()
    return agent_token(alice_api, "bot")


def run(server: Gunicorn, token: str, steps):
    """The official client in its current mode (2026-07-28), configured as docs/mcp.md says."""

    async def session():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with Client(
            streamable_http_client(f"{server.url}/mcp", http_client=http), mode="auto"
        ) as client:
            return await steps(client)

    return asyncio.run(session())


def error_of(result) -> tuple[int, str]:
    assert result.is_error is True
    error = result.structured_content["error"]
    return error["status"], error["code"]


def post(server: Gunicorn, token: str, body: bytes, **headers: str) -> urllib3.BaseHTTPResponse:
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
    }
    return urllib3.request(
        "POST", f"{server.url}/mcp", body=body, headers={**sent, **headers}, retries=False
    )


def test_call_api_headers_obey_the_proxys_rules(token, provider, credvault):
    """The pentest's override through `headers` with underscores, a header value that would
    split the request, and the agent's own token in a header: each a tool error, nothing
    sent."""
    provider.answer(200, {"ok": True})

    async def steps(client: Client):
        call = {"service": "github", "method": "GET", "path": "/repos/o/r"}
        override = await client.call_tool(
            "call_api", {**call, "headers": {"X_HTTP_Method_Override": "DELETE"}}
        )
        split = await client.call_tool(
            "call_api", {**call, "headers": {"X-Note": "a\r\nX-HTTP-Method-Override: DELETE"}}
        )
        leaked = await client.call_tool("call_api", {**call, "headers": {"X-Api-Key": token}})
        in_query = await client.call_tool("call_api", {**call, "query": {"key": token}})
        plain = await client.call_tool("call_api", {**call, "headers": {"X-Note": "fine"}})
        return override, split, leaked, in_query, plain

    override, split, leaked, in_query, plain = run(credvault, token, steps)
    assert error_of(override) == (403, "not_granted")
    assert error_of(split) == (400, "invalid_proxy_request")
    assert error_of(leaked) == (400, "agent_token_in_request")
    assert error_of(in_query) == (400, "agent_token_in_request")
    assert token not in json.dumps([r.structured_content for r in (leaked, in_query)])
    assert plain.is_error is False
    [sent] = provider.requests
    assert {k.lower(): v for k, v in sent.headers.items()}["x-note"] == "fine"
    events = AuditEvent.objects.filter(action="agent.proxy").order_by("seq")
    assert [(e.status, e.via) for e in events] == [
        (403, "mcp"),
        (400, "mcp"),
        (400, "mcp"),
        (400, "mcp"),
        (200, "mcp"),
    ]


@pytest.mark.parametrize("version", ["2025-11-25", MODERN])
def test_a_lone_surrogate_in_the_arguments_is_invalid_arguments(
    token, provider, credvault, version
):
    """Raw JSON that no client writes: `\\ud800` in the path, the body and a header."""
    for arguments in (
        r'{"service":"github","method":"GET","path":"/u\ud800"}',
        r'{"service":"github","method":"POST","path":"/u","body":"x\ud800"}',
        r'{"service":"github","method":"GET","path":"/u","headers":{"X-A":"\udc00"}}',
    ):
        body = (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call_api",'
            f'"arguments":{arguments},"_meta":{json.dumps(META)}}}}}'
        ).encode()
        headers = {"MCP-Protocol-Version": version}
        if version == MODERN:
            headers.update({"Mcp-Method": "tools/call", "Mcp-Name": "call_api"})
        else:
            body = body.replace(b',"_meta":' + json.dumps(META).encode(), b"")
        answer = post(credvault, token, body, **headers)
        assert answer.status == 200, answer.data
        result = answer.json()["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "invalid_arguments"
    assert provider.requests == []
    events = AuditEvent.objects.filter(action="agent.proxy")
    assert [(e.status, e.via) for e in events] == [(400, "mcp")] * 3


@pytest.mark.parametrize(
    ("header", "meta_version"),
    [
        ("2025-11-25", MODERN),  # a 2026-07-28 body under a handshake-era header
        (None, MODERN),  # the 2026-07-28 body without the header
        (MODERN, "2025-11-25"),
        ("2025-06-18", "2025-11-25"),
    ],
)
def test_a_header_that_disagrees_with_the_body_is_header_mismatch(
    token, provider, credvault, header, meta_version
):
    """HeaderMismatch (-32020), 400, and the tool is not called: no provider request, no
    event."""
    provider.answer(200, {"ok": True})
    meta = {**META, "io.modelcontextprotocol/protocolVersion": meta_version}
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "call_api",
                "arguments": {"service": "github", "method": "GET", "path": "/user"},
                "_meta": meta,
            },
        }
    ).encode()
    headers = {"Mcp-Method": "tools/call", "Mcp-Name": "call_api"}
    if header is not None:
        headers["MCP-Protocol-Version"] = header
    answer = post(credvault, token, body, **headers)
    assert answer.status == 400, answer.data
    message = answer.json()
    assert message["id"] == 3
    assert message["error"]["code"] == -32020
    assert "MCP-Protocol-Version" in message["error"]["message"]
    assert provider.requests == []
    assert not AuditEvent.objects.filter(action="agent.proxy", path="/user").exists()


def test_a_header_that_agrees_is_answered(token, provider, credvault):
    """The same request with header and body in agreement is called."""
    provider.answer(200, {"ok": True})
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "call_api",
                "arguments": {"service": "github", "method": "GET", "path": "/user"},
                "_meta": META,
            },
        }
    ).encode()
    answer = post(
        credvault,
        token,
        body,
        **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "call_api"},
    )
    assert answer.status == 200, answer.data
    assert answer.json()["result"]["structuredContent"]["status"] == 200
    assert [sent.path for sent in provider.requests] == ["/user"]
