"""A `call_api` that needs a person's approval, driven by the official `mcp` client against
credvault under gunicorn (docs/consent.md#with-an-mcp-client).

In 2026-07-28 the client's elicitation callback (which declares URL mode) receives the approval
page and the approval id, and hands them to the person: a member of the account, who decides.
The client then repeats the same `tools/call` and the call reaches the stand-in provider. The
handshake revisions, and a 2026-07-28 client without URL mode, get a tool error that gives the
page; once the person decided, the same call goes through. No MCP answer holds a stored value.

The person (`Person.decide`) follows the URL in Chromium, signed in at /account/login with
the member's email and password, and clicks "Allow once" (or "Deny") on the approval page.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.models import Approval, AuditEvent, Grant, Member
from tests.support import pages
from tests.support.harness import Gunicorn
from tests.support.helpers import agent_token, creds, marked, put_agent, served_env
from tests.support.stand_ins import ProviderServer

# slow: the official MCP client against gunicorn.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MEMBER_EMAIL = "person@example.com"
MEMBER_PASSWORD = "a long passphrase 1"


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    server = ProviderServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, provider) -> Iterator[Gunicorn]:
    """credvault under gunicorn, github pointed at the stand-in, its public URL its own."""
    server = Gunicorn(served_env({"github": provider.url}), workers=2)
    server.env["CREDVAULT_PUBLIC_URL"] = server.url
    with server:
        yield server


@pytest.fixture
def guarded(alice_api, alice, provider, credvault, monkeypatch) -> tuple[str, str]:
    """Alice's github set (a marked value) and agent `bot`, whose POSTs under /repos need a
    person's approval; the value and the agent's token."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="bot").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    provider.requests.clear()
    # The person decides from inside the client's event loop, between two of its requests.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    return value, agent_token(alice_api, "bot")


@dataclass
class Person:
    """The member of Alice's account who decides at the approval page in Chromium, signed in
    with their email and password: `choice` is what they click (`allow_once`, `deny`, or
    None: they open the page and decide later)."""

    account_id: int
    server: Gunicorn
    browser: Any
    choice: str | None = "allow_once"
    seen: list[tuple[str, str]] = field(default_factory=list)
    signed_in: bool = False

    def decide(self, url: str, approval_id: str) -> None:
        """Open `url` in the signed-in browser and click the choice's button."""
        self.seen.append((url, approval_id))
        assert url == f"{self.server.url}/approvals/{approval_id}"
        if not self.signed_in:
            pages.sign_in(
                self.browser, self.server.url, email=MEMBER_EMAIL, password=MEMBER_PASSWORD
            )
            self.signed_in = True
        if self.choice is None:
            self.browser.get(url)
            return
        outcome = pages.decide(self.browser, url, "once" if self.choice == "allow_once" else "deny")
        assert MEMBER_EMAIL in outcome


@pytest.fixture
def person(alice, credvault, browser) -> Person:
    """A member of Alice's account (a Django user whose email is its username)."""
    user = User.objects.create_user(MEMBER_EMAIL, MEMBER_EMAIL, MEMBER_PASSWORD)
    Member.objects.create(account=alice, user=user)
    return Person(alice.pk, credvault, browser)


@dataclass
class Seen:
    """Every body credvault answered the client with, and every elicitation the callback got."""

    bodies: list[str] = field(default_factory=list)
    elicitations: list[tuple[str, mcp_types.ElicitRequestParams]] = field(default_factory=list)


def connect(server: Gunicorn, token: str, mode: str, seen: Seen, person: Person | None) -> Client:
    """The official client as docs/mcp.md configures it; with `person`, an elicitation callback
    (which makes the client declare form and URL mode) that hands a URL to the person."""

    async def keep(response: httpx2.Response) -> None:
        seen.bodies.append((await response.aread()).decode())

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, event_hooks={"response": [keep]}
    )
    callback = None
    if person is not None:

        async def callback(context, params: mcp_types.ElicitRequestParams):
            seen.elicitations.append((str(context.request_id), params))
            assert isinstance(params, mcp_types.ElicitRequestURLParams)
            person.decide(params.url, str(context.request_id))
            return mcp_types.ElicitResult(action="accept")

    return Client(
        streamable_http_client(f"{server.url}/mcp", http_client=http),
        mode=mode,
        elicitation_callback=callback,
    )


def run(client: Client, steps: Callable):
    async def session():
        async with client:
            return await steps(client)

    return asyncio.run(session())


ISSUE = {
    "service": "github",
    "method": "POST",
    "path": "/repos/o/r/issues",
    "query": {"draft": "1"},
    "body": {"title": "t"},
}


def error_of(result: mcp_types.CallToolResult) -> dict:
    assert result.is_error is True
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content["error"]


def test_2026_url_elicitation_then_the_call_goes_through(guarded, person, provider, credvault):
    """The callback receives the approval page and id, the person allows it once, the client
    repeats the call by itself, and the stand-in receives it with the stored credential."""
    value, token = guarded
    provider.answer(201, {"number": 7, "echo": value})
    seen = Seen()

    async def steps(client: Client):
        asked = {**ISSUE, "body": {"title": value}}  # the agent knows it, and says it
        return client.protocol_version, await client.call_tool("call_api", asked)

    version, result = run(connect(credvault, token, "auto", seen, person), steps)
    assert version == "2026-07-28"
    approval = Approval.objects.get()
    assert person.seen == [(f"{credvault.url}/approvals/{approval.id}", approval.id)]
    ((key, params),) = seen.elicitations
    assert (key, params.elicitation_id) == (approval.id, approval.id)
    assert (params.mode, params.url) == ("url", f"{credvault.url}/approvals/{key}")
    assert "POST github/repos/o/r/issues" in params.message
    assert result.is_error is False
    assert result.structured_content["status"] == 201
    assert json.loads(result.structured_content["body"]) == {"number": 7, "echo": "[REDACTED]"}
    (sent,) = provider.requests
    assert (sent.method, sent.path, json.loads(sent.body)) == (
        "POST",
        "/repos/o/r/issues?draft=1",
        {"title": value},
    )
    assert sent.headers["Authorization"] == f"Bearer {value}"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", MEMBER_EMAIL)
    assert approval.used_at is not None
    called = AuditEvent.objects.get(action="agent.proxy", outcome="success")
    assert (called.via, called.target, called.upstream_status) == ("mcp", approval.id, 201)
    assert value not in approval.body_shown
    assert len(seen.bodies) >= 3  # discover, the interaction, the result
    for body in seen.bodies:
        assert value not in body


def test_2026_undecided_then_the_models_repeat_goes_through(guarded, person, provider, credvault):
    """The person opens the page but decides later: the client's retry is a tool error
    `approval_pending` that gives the page (no second prompt); once they allowed it, the
    model's repeat of the same call goes through without another prompt."""
    _, token = guarded
    person.choice = None
    provider.answer(201, {"number": 7})
    seen = Seen()

    async def steps(client: Client):
        pending = await client.call_tool("call_api", ISSUE)
        (approval_id,) = [key for key, _ in seen.elicitations]
        person.choice = "allow_once"
        person.decide(f"{credvault.url}/approvals/{approval_id}", approval_id)
        return pending, await client.call_tool("call_api", ISSUE)

    pending, sent = run(connect(credvault, token, "auto", seen, person), steps)
    error = error_of(pending)
    assert error["code"] == "approval_pending"
    assert error["approvalUrl"] in error["detail"]
    assert len(seen.elicitations) == 1
    assert sent.is_error is False
    assert len(provider.requests) == 1


def test_2026_denied_is_a_tool_error_saying_so(guarded, person, provider, credvault):
    _, token = guarded
    person.choice = "deny"
    seen = Seen()

    async def steps(client: Client):
        return await client.call_tool("call_api", ISSUE)

    error = error_of(run(connect(credvault, token, "auto", seen, person), steps))
    assert error["code"] == "approval_denied"
    assert "denied" in error["detail"]
    assert provider.requests == []
    assert Approval.objects.get().status == "denied"


def test_2026_without_url_mode_is_a_tool_error(guarded, person, provider, credvault):
    """A client with no elicitation callback declares no elicitation: the tool error gives the
    page; once the person allowed it, the same call goes through."""
    _, token = guarded
    provider.answer(201, {"number": 7})
    seen = Seen()

    async def steps(client: Client):
        asked = await client.call_tool("call_api", ISSUE)
        error = error_of(asked)
        person.decide(error["approvalUrl"], error["approvalId"])
        return client.protocol_version, asked, await client.call_tool("call_api", ISSUE)

    version, asked, sent = run(connect(credvault, token, "auto", seen, None), steps)
    assert version == "2026-07-28"
    assert error_of(asked)["code"] == "approval_required"
    assert sent.is_error is False
    assert len(provider.requests) == 1


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_handshake_revisions_get_the_tool_error_then_go_through(
    guarded, person, provider, credvault, version, monkeypatch
):
    """Even with an elicitation callback (declared at `initialize`, which a server without
    sessions cannot recall at `tools/call`): a tool error that gives the page and says to call
    again with the same arguments; denied, the tool error says so."""
    value, token = guarded
    if version == "2025-06-18":
        monkeypatch.setattr("mcp.client.session.LATEST_HANDSHAKE_VERSION", version)
    provider.answer(201, {"number": 7, "echo": value})
    seen = Seen()

    async def steps(client: Client):
        asked = error_of(await client.call_tool("call_api", ISSUE))
        pending = error_of(await client.call_tool("call_api", ISSUE))
        person.decide(asked["approvalUrl"], asked["approvalId"])
        sent = await client.call_tool("call_api", ISSUE)
        other = {**ISSUE, "path": "/repos/o/r/pulls"}
        second = error_of(await client.call_tool("call_api", other))
        person.choice = "deny"
        person.decide(second["approvalUrl"], second["approvalId"])
        denied = error_of(await client.call_tool("call_api", other))
        return client.protocol_version, asked, pending, sent, denied

    negotiated, asked, pending, sent, denied = run(
        connect(credvault, token, "legacy", seen, person), steps
    )
    assert negotiated == version
    assert seen.elicitations == []
    assert asked["code"] == "approval_required"
    assert asked["approvalUrl"] == f"{credvault.url}/approvals/{asked['approvalId']}"
    for said in (asked["approvalUrl"], "person", "same arguments"):
        assert said in asked["detail"]
    assert (pending["code"], pending["approvalId"]) == ("approval_pending", asked["approvalId"])
    assert sent.is_error is False
    assert json.loads(sent.structured_content["body"]) == {"number": 7, "echo": "[REDACTED]"}
    assert (denied["code"], "denied" in denied["detail"]) == ("approval_denied", True)
    assert len(provider.requests) == 1
    refusals = AuditEvent.objects.filter(action="agent.proxy", status=403)
    assert [event.via for event in refusals] == ["mcp"] * 4
    assert len(seen.bodies) >= 6
    for body in seen.bodies:
        assert value not in body
