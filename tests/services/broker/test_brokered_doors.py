"""A brokered call has one door per rule whichever route it comes by: the body's limit is
checked by the broker itself (`services.broker.call.call`), and a refused call is written by
the one recorder (`services.audit.record_refusal`) with the same fields from the proxy route
and from MCP's call_api."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from services import audit
from services.audit import Actor
from services.broker.call import ProxyRequest, call
from services.exceptions import PayloadTooLarge
from services.models import Agent, AuditEvent
from tests.support.helpers import agent_token, creds, marked, put_agent
from tests.support.helpers import call as proxy_call

REFUSED_FIELDS = ("action", "outcome", "status", "service", "method", "path", "agent_name")


@pytest.fixture
def agent(alice_api, provider_server):
    """Alice's github set, a proxy grant of github to `bot`, and its token."""
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    return agent_token(alice_api, "bot")


def tool(token: str, name: str, arguments: dict) -> dict:
    """A `tools/call` of MCP's handshake era: its result."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    message["params"] = {"name": name, "arguments": arguments}
    response = Client().post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"},
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.mark.django_db
def test_the_broker_refuses_a_body_over_the_limit_for_every_route(agent, settings):
    settings.CREDVAULT_PROXY_MAX_BODY = 10
    token = agent
    proxied = proxy_call(token, "POST", "github", "/x", body=b"x" * 11)
    tooled = tool(
        token, "call_api", {"service": "github", "method": "POST", "path": "/x", "body": "x" * 11}
    )
    assert proxied.status_code == 413
    assert tooled["isError"] is True
    refusal = tooled["structuredContent"]["error"]
    assert (refusal["status"], refusal["code"], refusal["detail"]) == (
        413,
        proxied.json()["code"],
        proxied.json()["detail"],
    )
    # The broker's own entry point refuses it, whoever calls it.
    bot = Agent.objects.get(name="bot")
    actor = Actor(bot.account_id, "cva_x", "test", agent_id=bot.pk, agent_name="bot")
    request = ProxyRequest(method="POST", raw_path="/x", query="", headers={}, body=b"x" * 11)
    with pytest.raises(PayloadTooLarge) as refused:
        call(actor=actor, service="github", request=request)
    assert str(refused.value.detail) == "The body is larger than 10 bytes."


@pytest.mark.django_db
def test_a_refused_call_is_recorded_once_alike_from_the_proxy_and_mcp(agent, monkeypatch):
    token = agent
    recorded = []
    record_refusal = audit.record_refusal
    monkeypatch.setattr(
        audit, "record_refusal", lambda *a, **k: recorded.append(k) or record_refusal(*a, **k)
    )
    before = AuditEvent.objects.count()
    proxied = proxy_call(token, "GET", "elsewhere", "/repos/x")
    assert proxied.status_code == 403
    tooled = tool(token, "call_api", {"service": "elsewhere", "method": "GET", "path": "/repos/x"})
    assert tooled["structuredContent"]["error"]["code"] == "not_granted"
    refused = list(AuditEvent.objects.filter(status=403).order_by("seq"))
    assert len(refused) == 2
    by_proxy, by_mcp = refused
    assert [getattr(by_proxy, name) for name in REFUSED_FIELDS] == [
        getattr(by_mcp, name) for name in REFUSED_FIELDS
    ]
    assert (by_proxy.service, by_proxy.method, by_proxy.path) == ("elsewhere", "GET", "/repos/x")
    assert (by_proxy.via, by_mcp.via) == ("", "mcp")
    assert [entry["status"] for entry in recorded] == [403, 403]
    assert AuditEvent.objects.count() == before + 2


@pytest.mark.django_db
def test_a_call_looks_its_provider_up_once(agent, monkeypatch):
    """The broker asks the catalog for the service's provider once a call, and checks the
    named base and the proxyable provider against that one answer."""
    from providers import catalog
    from services.broker import call as broker_call

    looked_up = []

    class CountedCatalog:
        def __getattr__(self, name: str):
            return getattr(catalog, name)

        def get(self, service: str):
            looked_up.append(service)
            return catalog.get(service)

    monkeypatch.setattr(broker_call, "catalog", CountedCatalog())
    response = proxy_call(agent, "GET", "github", "/user")
    assert response.status_code == 200, response.content
    assert looked_up == ["github"]
