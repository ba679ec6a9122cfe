"""A `call_api` that needs a person's approval, on the wire through Django's test client
(docs/mcp.md#approvals): in 2026-07-28 with URL-mode elicitation declared, the revision's URL
interaction keyed by the approval id; answered and still undecided, or without URL mode, or in
the handshake revisions, a tool error that gives the page; the same arguments meet the same
approval; each refusal is audited via mcp; no stored value in any answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from services.consent.approvals import AskedCall, approval_url, call_digest
from services.consent.decisions import Decider, approve_call, deny
from services.mcp.tools import proxy_request
from services.models import Approval, AuditEvent, Grant
from tests.support.helpers import agent_token, creds, marked, put_agent

MODERN = "2026-07-28"

URL_MODE = {"elicitation": {"form": {}, "url": {}}}
ISSUE = {
    "service": "github",
    "method": "POST",
    "path": "/repos/o/r/issues",
    "query": {"draft": "1", "labels": ["a", "b"]},
    "body": {"title": "t", "labels": ["x"]},
}


@pytest.fixture
def guarded(alice_api, provider_server):
    """Alice's github set (a marked value) and agent `bot`, whose POSTs under /repos need a
    person's approval; the value and the agent's token."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    return value, agent_token(alice_api, "bot")


def rpc(method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def post(token: str, message: dict, *, version: str | None = None):
    """One POST to /mcp; `version` sends MCP-Protocol-Version, and for 2026-07-28 the routing
    headers and (unless the message has its own) a `_meta` that declares no capability."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    if version == MODERN:
        headers["Mcp-Method"] = message["method"]
        message["params"].setdefault("_meta", meta({}))
        if message["method"] == "tools/call":
            headers["Mcp-Name"] = message["params"]["name"]
    return Client(raise_request_exception=False).post(
        "/mcp", json.dumps(message), content_type="application/json", headers=headers
    )


def meta(capabilities: dict) -> dict:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


def decider(alice) -> Decider:
    return Decider(account_id=alice.pk, request_id="test", member="person@example.com")


def call_api(
    token: str,
    arguments: dict,
    *,
    version: str = MODERN,
    capabilities: dict | None = None,
    **params: Any,
) -> dict:
    """One tools/call of call_api; in 2026-07-28 with `capabilities` declared in `_meta`."""
    message = rpc("tools/call", {"name": "call_api", "arguments": arguments, **params})
    if version == MODERN:
        message["params"]["_meta"] = meta(capabilities or {})
    response = post(token, message, version=version)
    assert response.status_code == 200, response.content
    assert "error" not in response.json()
    return response.json()["result"]


def tool_error(result: dict) -> dict:
    """A tool error's problem, after checking that its text repeats it."""
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"]["error"]


class TestUrlElicitation:
    def test_the_first_call_is_the_url_interaction_keyed_by_the_approval(
        self, guarded, provider_server
    ):
        _, token = guarded
        result = call_api(token, ISSUE, capabilities=URL_MODE)
        approval = Approval.objects.get()
        assert result["resultType"] == "input_required"
        assert set(result) == {"resultType", "inputRequests"}
        assert result["inputRequests"] == {
            approval.id: {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": result["inputRequests"][approval.id]["params"]["message"],
                    "url": approval_url(approval.id),
                    "elicitationId": approval.id,
                },
            }
        }
        message = result["inputRequests"][approval.id]["params"]["message"]
        assert "POST github/repos/o/r/issues" in message
        assert "http" not in message  # the URL is the url field's alone
        assert provider_server.requests == []

    def test_a_retry_that_answers_it_while_undecided_is_approval_pending(self, guarded):
        _, token = guarded
        first = call_api(token, ISSUE, capabilities=URL_MODE)
        (approval_id,) = first["inputRequests"]
        responses = {approval_id: {"action": "accept"}}
        retried = call_api(token, ISSUE, capabilities=URL_MODE, inputResponses=responses)
        error = tool_error(retried)
        assert retried["resultType"] == "complete"
        assert (error["status"], error["code"], error["approvalId"]) == (
            403,
            "approval_pending",
            approval_id,
        )
        assert error["approvalUrl"] in error["detail"]
        assert "same arguments" in error["detail"]
        # A new tools/call of the same arguments (a model's own repeat) shows the page again.
        again = call_api(token, ISSUE, capabilities=URL_MODE)
        assert list(again["inputRequests"]) == [approval_id]
        assert Approval.objects.count() == 1

    def test_approved_the_retry_goes_through_once(self, guarded, provider_server, alice):
        _, token = guarded
        provider_server.answer(201, {"number": 7})
        (approval_id,) = call_api(token, ISSUE, capabilities=URL_MODE)["inputRequests"]
        approve_call(decider=decider(alice), approval_id=approval_id)
        responses = {approval_id: {"action": "accept"}}
        sent = call_api(token, ISSUE, capabilities=URL_MODE, inputResponses=responses)
        assert (sent["isError"], sent["structuredContent"]["status"]) == (False, 201)
        (request,) = provider_server.requests
        assert (request.method, request.path) == (
            "POST",
            "/repos/o/r/issues?draft=1&labels=a&labels=b",
        )
        assert json.loads(request.body) == ISSUE["body"]
        # Allowed once: the next such call asks anew.
        asked = call_api(token, ISSUE, capabilities=URL_MODE)
        assert asked["resultType"] == "input_required"
        assert list(asked["inputRequests"]) != [approval_id]

    def test_a_declined_page_is_not_asked_again_in_the_same_call(self, guarded):
        _, token = guarded
        (approval_id,) = call_api(token, ISSUE, capabilities=URL_MODE)["inputRequests"]
        for action in ("decline", "cancel"):
            responses = {approval_id: {"action": action}}
            retried = call_api(token, ISSUE, capabilities=URL_MODE, inputResponses=responses)
            assert tool_error(retried)["code"] == "approval_pending"

    def test_the_tool_says_a_call_may_need_approval(self, guarded):
        _, token = guarded
        response = post(token, rpc("tools/list"), version=MODERN)
        description = response.json()["result"]["tools"][1]["description"]
        assert "approval" in description
        assert "same arguments" in description

    @pytest.mark.parametrize(
        "capabilities",
        [{}, {"elicitation": {}}, {"elicitation": {"form": {}}}, {"elicitation": {"url": True}}],
        ids=["none", "empty (form)", "form", "url not an object"],
    )
    def test_without_url_mode_it_is_a_tool_error(self, guarded, capabilities):
        _, token = guarded
        result = call_api(token, ISSUE, capabilities=capabilities)
        error = tool_error(result)
        approval = Approval.objects.get()
        assert (error["code"], error["approvalId"]) == ("approval_required", approval.id)
        assert error["approvalUrl"] == approval_url(approval.id)

    def test_a_denied_call_is_a_tool_error_never_an_interaction(self, guarded, alice):
        _, token = guarded
        (approval_id,) = call_api(token, ISSUE, capabilities=URL_MODE)["inputRequests"]
        deny(decider=decider(alice), approval_id=approval_id)
        error = tool_error(call_api(token, ISSUE, capabilities=URL_MODE))
        assert error["code"] == "approval_denied"
        assert "denied" in error["detail"]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
class TestHandshakeRevisions:
    def test_asked_pending_then_approved(self, guarded, provider_server, alice, version):
        _, token = guarded
        provider_server.answer(201, {"number": 7})
        asked = tool_error(call_api(token, ISSUE, version=version))
        assert asked["code"] == "approval_required"
        assert asked["approvalUrl"].endswith("/approvals/" + asked["approvalId"])
        for said in (asked["approvalUrl"], "person", "same arguments", "nothing was sent"):
            assert said in asked["detail"]
        pending = tool_error(call_api(token, ISSUE, version=version))
        assert (pending["code"], pending["approvalId"]) == ("approval_pending", asked["approvalId"])
        approve_call(decider=decider(alice), approval_id=asked["approvalId"])
        sent = call_api(token, ISSUE, version=version)
        assert sent["isError"] is False
        assert len(provider_server.requests) == 1

    def test_denied_and_expired(self, guarded, alice, version):
        _, token = guarded
        asked = tool_error(call_api(token, ISSUE, version=version))
        deny(decider=decider(alice), approval_id=asked["approvalId"])
        denied = tool_error(call_api(token, ISSUE, version=version))
        assert denied["code"] == "approval_denied"
        other = {**ISSUE, "path": "/repos/o/r/pulls"}
        waited = tool_error(call_api(token, other, version=version))
        Approval.objects.filter(id=waited["approvalId"]).update(expires_at="2000-01-01T00:00Z")
        expired = tool_error(call_api(token, other, version=version))
        assert expired["code"] == "approval_expired"
        assert "again" in expired["detail"]

    def test_other_arguments_are_another_approval(self, guarded, version):
        _, token = guarded
        first = tool_error(call_api(token, ISSUE, version=version))
        changed = tool_error(call_api(token, {**ISSUE, "body": {"title": "u"}}, version=version))
        assert changed["code"] == "approval_required"
        assert changed["approvalId"] != first["approvalId"]

    def test_too_many_pending(self, guarded, version):
        _, token = guarded
        for index in range(5):
            tool_error(call_api(token, {**ISSUE, "path": f"/repos/o/r{index}"}, version=version))
        crowded = tool_error(call_api(token, {**ISSUE, "path": "/repos/o/r9"}, version=version))
        assert (crowded["status"], crowded["code"]) == (429, "too_many_pending")


def test_the_same_arguments_make_the_same_digest():
    """What the gate binds an approval to is built from call_api's arguments alone: the same
    arguments (a JSON body, a query of lists, headers) give the same digest each time."""

    def digest(arguments: dict) -> str:
        service, request = proxy_request(json.loads(json.dumps(arguments)))
        return call_digest(
            AskedCall(service, request.method, request.agent_path, request.query, request.body)
        )

    arguments = {**ISSUE, "headers": {"X-Trace": "1"}, "path": "/repos/o/r/issues?x=1"}
    assert digest(arguments) == digest(arguments)
    assert digest(arguments) != digest({**arguments, "body": {"title": "u", "labels": ["x"]}})
    assert digest(arguments) != digest({**arguments, "query": {"draft": "2"}})


def test_each_refusal_is_audited_via_mcp(guarded, alice):
    _, token = guarded
    (approval_id,) = call_api(token, ISSUE, capabilities=URL_MODE)["inputRequests"]
    tool_error(call_api(token, ISSUE, version="2025-11-25"))
    events = list(AuditEvent.objects.order_by("seq").values_list("action", "status", "via"))
    assert events[-3:] == [
        ("approval.requested", 201, ""),
        ("agent.proxy", 403, "mcp"),
        ("agent.proxy", 403, "mcp"),
    ]
    requested = AuditEvent.objects.get(action="approval.requested")
    assert (requested.target, requested.method, requested.path) == (
        approval_id,
        "POST",
        "/repos/o/r/issues",
    )


def test_no_stored_value_in_any_answer(guarded, provider_server, alice):
    """The agent sends the stored value itself in the body; the provider echoes it: neither the
    interaction, the tool errors nor the result hold it, and the approval shows it redacted."""
    value, token = guarded
    provider_server.answer(201, {"echo": value})
    leaky = {**ISSUE, "body": {"title": value}}
    answers = [post(token, rpc("tools/call", {"name": "call_api", "arguments": leaky}))]
    answers.append(post(token, rpc("tools/call", {"name": "call_api", "arguments": leaky})))
    (approval_id,) = call_api(token, {**leaky, "path": "/repos/o/s"}, capabilities=URL_MODE)[
        "inputRequests"
    ]
    approve_call(
        decider=decider(alice),
        approval_id=Approval.objects.exclude(id=approval_id).get().id,
    )
    answers.append(post(token, rpc("tools/call", {"name": "call_api", "arguments": leaky})))
    for answer in answers:
        assert value not in answer.content.decode()
    assert answers[-1].json()["result"]["structuredContent"]["status"] == 201
    for approval in Approval.objects.all():
        assert value not in approval.body_shown
        assert "[REDACTED]" in approval.body_shown
