"""The walk-through of the docs (docs/api.md, docs/agents.md and docs/webhooks.md), driven
through a client generated from the served document: `python -m scripts.client_walk`.

Starts a throwaway credvault (its own SQLite file, gunicorn on a free loopback port, a fake
provider on 127.0.0.1 that refuses every key, as GitHub refuses `ghp_example`, and a webhook
receiver on 127.0.0.1 that CREDVAULT_WEBHOOK_ALLOWED_HOSTS names), fetches
`GET /api/v1/schema`, generates a Python client from it with openapi-python-client into a
temporary directory under var/, imports it as generated (no edit) and walks: list, test, store,
verify on store, a refused store, the provider list, an agent with a grant, its token, the agent
read, brokered calls refused without a grant, an access request approved narrower and another
denied, the grant removed, the service removed, the agent deleted, a token revoked, an OAuth
client and a connect link; a webhook endpoint, listed and shown, a connection's event and a
test event delivered (`manage.py deliver_webhooks --once`) and their signatures verified, the
deliveries log a page at a time, a redelivery, a new secret (the next delivery signed with both),
the endpoint changed and disabled (a test event waits) then resumed, an unknown event type, the
eleventh endpoint, an unknown endpoint and event refused, the endpoint deleted; and the audit
pages. Every operation of the document is called; every answer must have the documented status
and parse into the documented model. Prints the figures; exits non-zero naming the first
mismatch.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

from tests.support.harness import (
    BASE_DIR,
    Gunicorn,
    every_provider_at,
    manage,
    migrated_account,
    request,
    server_env,
)
from tests.support.stand_ins import ProviderServer, Recorded

WORK = BASE_DIR / "var" / "client-walk"
PACKAGE = "credvault_client"
# Generator options only: the generated code itself is used as it comes.
GENERATOR_CONFIG = {"package_name_override": PACKAGE, "project_name_override": "credvault-client"}


class Mismatch(Exception):
    """The server or the generated client did not do what the document says."""


def generate(document: bytes, into: Path) -> None:
    """Generate the client package from `document` as `into`/PACKAGE."""
    spec = into / "openapi.json"
    spec.write_bytes(document)
    config = into / "config.json"
    config.write_text(json.dumps(GENERATOR_CONFIG))
    output = into / PACKAGE
    # The generator formats its output with ruff, which it looks for on PATH.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("openapi-python-client")),
            "generate",
            "--path",
            str(spec),
            "--config",
            str(config),
            "--output-path",
            str(output),
            "--meta",
            "none",
            "--fail-on-warning",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise Mismatch(
            "openapi-python-client could not generate a client without warnings:\n"
            + (result.stdout + result.stderr).strip()[-3000:]
        )


@dataclass
class Walk:
    """The generated client and a record of what was called."""

    package: Any
    url: str
    token: str
    calls: Counter = field(default_factory=Counter)

    def api(self, tag: str, operation: str) -> Any:
        return importlib.import_module(f"{PACKAGE}.api.{tag}.{operation}")

    def model(self, name: str) -> Any:
        return getattr(importlib.import_module(f"{PACKAGE}.models"), name)

    def client(self, token: str | None = None) -> Any:
        return self.package.AuthenticatedClient(
            base_url=self.url, token=token or self.token, raise_on_unexpected_status=True
        )

    def call(self, tag: str, operation: str, status: int, model: str | None, **kwargs: Any):
        """Call one operation; the answer must have `status` and parse into `model` (None: no
        body). Returns the parsed body."""
        kwargs.setdefault("client", self.client())
        where = f"{operation} (expected {status})"
        errors = importlib.import_module(f"{PACKAGE}.errors")
        try:
            response = self.api(tag, operation).sync_detailed(**kwargs)
        except errors.UnexpectedStatus as error:
            raise Mismatch(
                f"{where}: answered {error.status_code}, a status the document does not list "
                f"for it: {error.content[:300]!r}"
            ) from None
        self.calls[operation] += 1
        if response.status_code != HTTPStatus(status):
            raise Mismatch(f"{where}: answered {int(response.status_code)}: {response.content!r}")
        parsed = response.parsed
        if model is None:
            if parsed is not None or response.content:
                raise Mismatch(f"{where}: a body where the document says none: {parsed!r}")
            return None
        expected = self.model(model)
        items = parsed if isinstance(parsed, list) else [parsed]
        if not all(isinstance(item, expected) for item in items):
            raise Mismatch(f"{where}: parsed as {type(parsed).__name__}, not {model}")
        # The model must hold the whole answer: a member the document does not name is
        # dropped by the generated parser, and shows here.
        again = [item.to_dict() for item in items]
        sent = json.loads(response.content)
        if not same(sent if isinstance(parsed, list) else [sent], again):
            raise Mismatch(
                f"{where}: the model does not hold the answer as sent:\n"
                f"  sent: {str(sent)[:600]}\n  held: {str(again)[:600]}"
            )
        return parsed

    def problem(self, tag: str, operation: str, status: int, code: str, **kwargs: Any):
        problem = self.call(tag, operation, status, "Problem", **kwargs)
        if problem.code != self.model("ProblemCode")(code):
            raise Mismatch(f"{operation}: code {problem.code!r}, expected {code}")
        return problem


def same(sent: Any, held: Any) -> bool:
    """Whether the JSON the server sent and the model's `to_dict()` agree: the same members
    everywhere and the same values, a time being equal as a time (`Z` or `+00:00`)."""
    if isinstance(sent, dict) and isinstance(held, dict):
        return sent.keys() == held.keys() and all(same(sent[k], held[k]) for k in sent)
    if isinstance(sent, list) and isinstance(held, list):
        return len(sent) == len(held) and all(map(same, sent, held))
    if isinstance(sent, str) and isinstance(held, str) and sent != held:
        try:
            return datetime.fromisoformat(sent) == datetime.fromisoformat(held)
        except ValueError:
            return False
    return sent == held


def expect(what: str, actual: Any, expected: Any) -> None:
    if actual != expected:
        raise Mismatch(f"{what}: {actual!r}, expected {expected!r}")


def walk(w: Walk, hooks: Hooks) -> tuple[int, int]:
    """The walk-through of the docs, section by section, in order; (audit pages, audit events)
    read at the end."""
    list_test_and_store(w)
    refused_stores(w)
    list_providers(w)
    token = agent_and_token(w)
    agent_reads_and_refused_calls(w, token)
    access_asked_and_decided(w, token)
    grant_changes(w, token)
    service_and_agent_removed(w, token)
    token_revoked(w)
    oauth_client_and_connect(w)
    webhooks(w, hooks)
    return audit_pages(w)


def credentials(w: Walk, service: str, **values: str) -> Any:
    """The body of a store or a test: `service` with `values` by keyName."""
    entry = w.model("CredentialEntry")
    return w.model("CredentialInput")(
        service=service,
        credentials=[entry(key_name=name, value=value) for name, value in values.items()],
    )


def read_grant(w: Walk, service: str) -> Any:
    """An agent's body with a grant that also allows the plaintext read of `service` (a
    service alone is a brokered grant)."""
    grant = w.model("GrantInput")(service=service, access=w.model("GrantAccess")("read"))
    return w.model("AgentInput")(services=[grant])


def list_test_and_store(w: Walk) -> None:
    """The list, empty; a test of a refused key and of a service outside the catalog; a store,
    its replacement and an OAuth set; the list again."""
    expect("services at first", w.call("services", "list_services", 200, "ListedService"), [])
    github = credentials(w, "github", api_key="ghp_example")
    result = w.call("services", "verify_credentials", 200, "VerificationResult", body=github)
    expect(
        "test of a refused key",
        (result.ok, result.verified, result.reason),
        (False, False, w.model("VerificationReason")("rejected")),
    )
    internal = credentials(w, "My Internal API", api_key="k-123")
    result = w.call("services", "verify_credentials", 200, "VerificationResult", body=internal)
    expect(
        "test outside the catalog",
        (result.ok, result.verified, str(result.reason)),
        (True, False, "no_verifier"),
    )
    spelled = credentials(w, "GitHub", api_key="ghp_example")
    stored = w.call("services", "store_credentials", 201, "ConnectedService", body=spelled)
    expect("stored service", (stored.service, str(stored.key_type)), ("github", "api_key"))
    w.call("services", "store_credentials", 200, "ConnectedService", body=github)
    oauth_set = {"access_token": "xoxp-example", "refresh_token": "xoxe-example"}
    slack = w.call(
        "services",
        "store_credentials",
        201,
        "ConnectedService",
        body=credentials(w, "slack", **oauth_set),
    )
    expect("OAuth keyType", str(slack.key_type), "oauth")
    listed = w.call("services", "list_services", 200, "ListedService")
    expect("services listed", [s.service for s in listed], ["github", "slack"])
    expect("services' status", [str(s.status) for s in listed], ["connected", "connected"])


def refused_stores(w: Walk) -> None:
    """Verify on store refusing a rejected key, and a store refused for its service name."""
    refused = w.problem(
        "services",
        "store_credentials",
        422,
        "verification_failed",
        body=credentials(w, "openai", api_key="sk-example"),
        verify="required",
    )
    expect("verify on store, reason", str(refused.reason), "rejected")
    invalid = w.problem(
        "services",
        "store_credentials",
        400,
        "invalid_service",
        body=credentials(w, "../etc", api_key="x"),
    )
    expect("field of the refused store", [e.field for e in invalid.errors], ["service"])


def list_providers(w: Walk) -> None:
    providers = w.call("providers", "list_providers", 200, "Provider")
    expect("providers listed", len(providers) > 0, True)


def agent_and_token(w: Walk) -> str:
    """The agent report-bot with a read grant on github, listed; a token of it, listed. Returns
    the token."""
    agent = w.call(
        "agents", "put_agent", 201, "Agent", name="report-bot", body=read_grant(w, "github")
    )
    expect(
        "agent's grants",
        [(g.service, str(g.access), list(map(str, g.methods)), g.paths) for g in agent.services],
        [("github", "read", ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], ["/"])],
    )
    agents = w.call("agents", "list_agents", 200, "Agent")
    expect("agents listed", [a.name for a in agents], ["report-bot"])
    issued = w.call(
        "agent_tokens",
        "issue_agent_token",
        201,
        "AgentToken",
        name="report-bot",
        body=w.model("AgentTokenInput")(expires_in_days=30),
    )
    tokens = w.call("agent_tokens", "list_agent_tokens", 200, "AgentTokenInfo", name="report-bot")
    expect("agent's tokens", [t.prefix for t in tokens], [issued.prefix])
    return issued.token


def agent_reads_and_refused_calls(w: Walk, token: str) -> None:
    """The agent reads github; the account's token may not; a brokered call of a service the
    agent has no grant for is refused, with each method, and nothing is sent."""
    agent = w.client(token)
    read = w.call(
        "agent", "agent_read_credentials", 200, "AgentCredentials", service="github", client=agent
    )
    expect(
        "agent read",
        [(c.key_name, c.value) for c in read.credentials],
        [("api_key", "ghp_example")],
    )
    w.problem("agent", "agent_read_credentials", 403, "insufficient_scope", service="github")
    for method in ("get", "post", "put", "patch", "delete"):
        w.problem(
            "agent",
            f"agent_proxy_{method}",
            403,
            "not_granted",
            service="gitlab",
            path="user",
            client=agent,
        )


def access_asked_and_decided(w: Walk, token: str) -> None:
    """The agent asks for slack and reads its request; the account lists it and approves it
    narrower, once (a second decision is refused); a second request is denied."""
    agent = w.client(token)
    method = w.model("ProxyMethod")
    asked = w.model("AccessRequestInput")(
        services=[w.model("GrantInput")(service="slack", methods=[method("GET"), method("POST")])],
        reason="Post the weekly summary.",
        valid_for_minutes=60,
    )
    made = w.call(
        "agent", "agent_request_access", 201, "AccessRequestCreated", body=asked, client=agent
    )
    shown = w.call(
        "agent",
        "agent_read_access_request",
        200,
        "AccessRequest",
        approval_id=made.id,
        client=agent,
    )
    expect("access request read", (str(shown.status), shown.reason), ("pending", asked.reason))
    listed = w.call("approvals", "list_approvals", 200, "Approval")
    expect("approvals listed", [(a.id, str(a.kind)) for a in listed], [(made.id, "access")])
    narrower = w.model("ApproveInput")(
        services=[w.model("GrantInput")(service="slack", methods=[method("GET")])],
        valid_for_minutes=30,
    )
    approved = w.call("approvals", "approve", 200, "Approval", approval_id=made.id, body=narrower)
    expect(
        "access granted",
        [(g.service, list(map(str, g.methods))) for g in approved.granted],
        [("slack", ["GET"])],
    )
    w.problem("approvals", "approve", 409, "approval_decided", approval_id=made.id, body=narrower)
    again = w.call(
        "agent", "agent_request_access", 201, "AccessRequestCreated", body=asked, client=agent
    )
    denied = w.call("approvals", "deny", 200, "Approval", approval_id=again.id)
    expect("access request denied", str(denied.status), "denied")
    w.problem("approvals", "deny", 404, "approval_not_found", approval_id="apv_unknown")


def grant_changes(w: Walk, token: str) -> None:
    """The read refused once the grant is gone, then while the grant is a brokered one; the
    read grant put back."""
    agent = w.client(token)
    no_grant = w.model("AgentInput")(services=[])
    w.call("agents", "put_agent", 200, "Agent", name="report-bot", body=no_grant)
    w.problem("agent", "agent_read_credentials", 403, "not_granted", service="github", client=agent)
    brokered = w.model("AgentInput")(services=["github"])
    w.call("agents", "put_agent", 200, "Agent", name="report-bot", body=brokered)
    w.problem(
        "agent", "agent_read_credentials", 403, "read_not_granted", service="github", client=agent
    )
    w.call("agents", "put_agent", 200, "Agent", name="report-bot", body=read_grant(w, "github"))


def service_and_agent_removed(w: Walk, token: str) -> None:
    """The service removed (then unknown), so the read finds nothing; the agent deleted (then
    unknown), so its token is refused."""
    agent = w.client(token)
    w.call("services", "remove_service", 204, None, service="github")
    w.problem("services", "remove_service", 404, "service_not_connected", service="github")
    w.problem(
        "agent",
        "agent_read_credentials",
        404,
        "service_not_connected",
        service="github",
        client=agent,
    )
    w.call("agents", "delete_agent", 204, None, name="report-bot")
    w.problem(
        "agent", "agent_read_credentials", 401, "invalid_token", service="github", client=agent
    )
    w.problem("agents", "delete_agent", 404, "agent_not_found", name="report-bot")


def token_revoked(w: Walk) -> None:
    """A second agent's token, revoked: refused at once."""
    slack_only = w.model("AgentInput")(services=["slack"])
    w.call("agents", "put_agent", 201, "Agent", name="nightly", body=slack_only)
    spare = w.call("agent_tokens", "issue_agent_token", 201, "AgentToken", name="nightly")
    w.call("agent_tokens", "revoke_agent_token", 204, None, name="nightly", prefix=spare.prefix)
    w.problem(
        "agent",
        "agent_read_credentials",
        401,
        "invalid_token",
        service="slack",
        client=w.client(spare.token),
    )


def oauth_client_and_connect(w: Walk) -> None:
    """An OAuth client, the list, a connect link; the client removed, so a connect is refused."""
    client = w.model("OAuthClientInput")(
        client_id="walk-client",
        client_secret="walk-secret",  # noqa: S106 - a throwaway server's test value
    )
    w.call("oauth", "put_oauth_client", 201, "OAuthClient", provider="github", body=client)
    w.call("oauth", "list_oauth_clients", 200, "OAuthClient")
    link = w.call(
        "oauth", "connect", 201, "Connect", provider="github", body=w.model("ConnectInput")()
    )
    expect("the connect link, credvault's start page", "/oauth/start/" in link.authorize_url, True)
    w.call("oauth", "delete_oauth_client", 204, None, provider="github")
    w.problem(
        "oauth",
        "connect",
        404,
        "oauth_client_not_found",
        provider="github",
        body=w.model("ConnectInput")(),
    )


@dataclass
class Hooks:
    """A webhook receiver on 127.0.0.1 (a host CREDVAULT_WEBHOOK_ALLOWED_HOSTS names) and the
    delivery worker, run as an operator runs it (`manage.py deliver_webhooks --once`) against
    the walk's database."""

    receiver: ProviderServer
    env: dict[str, str]
    seen: int = 0

    @property
    def url(self) -> str:
        return f"{self.receiver.url}/hooks"

    def deliver(self, what: str, count: int) -> list[Recorded]:
        """Send what is due: the `count` requests the receiver got, in order."""
        manage(self.env, "deliver_webhooks", "--once")
        got = self.receiver.requests[self.seen :]
        self.seen += len(got)
        expect(f"{what}, deliveries", len(got), count)
        return got


@dataclass(frozen=True)
class AsSent:
    """A body the generated model cannot hold (an event type outside the EventType enum),
    given to the generated operation, which sends what `to_dict()` returns."""

    document: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.document)


def event_id_of(delivery: Recorded) -> str | None:
    """The `webhook-id` header: the event's id, the same on every attempt."""
    return {name.lower(): value for name, value in delivery.headers.items()}.get("webhook-id")


def verified(what: str, delivery: Recorded, *secrets: str) -> dict[str, Any]:
    """The delivery's body, once its signature is checked with each of `secrets` (Standard
    Webhooks: what a receiver runs)."""
    headers = {name.lower(): value for name, value in delivery.headers.items()}
    for secret in secrets:
        try:
            payload = Webhook(secret).verify(delivery.body, headers)
        except WebhookVerificationError as error:
            raise Mismatch(f"{what}: the signature does not verify: {error}") from None
    expect(f"{what}, signatures", len(headers["webhook-signature"].split(" ")), len(secrets))
    return payload


def webhooks(w: Walk, hooks: Hooks) -> None:
    """docs/webhooks.md: an endpoint, its events, the test event, the deliveries log, a
    redelivery, a new secret, a change, the problems, the endpoint deleted."""
    endpoint = webhook_endpoint(w, hooks)
    delivered_events(w, hooks, endpoint)
    webhook_changes(w, hooks, endpoint)
    webhook_problems(w, hooks, endpoint.id)
    w.call("webhooks", "delete_webhook", 204, None, webhook_id=endpoint.id)
    w.problem("webhooks", "get_webhook", 404, "webhook_not_found", webhook_id=endpoint.id)
    expect("endpoints at the end", w.call("webhooks", "list_webhooks", 200, "Webhook"), [])


def webhook_endpoint(w: Walk, hooks: Hooks) -> Any:
    """None at first; an endpoint for new connections, its secret shown once; listed, shown."""
    expect("endpoints at first", w.call("webhooks", "list_webhooks", 200, "Webhook"), [])
    event = w.model("EventType")
    created = w.call(
        "webhooks",
        "create_webhook",
        201,
        "WebhookCreated",
        body=w.model("WebhookInput")(
            url=hooks.url, events=[event("connection.created")], description="ops"
        ),
    )
    expect("the endpoint's secret", created.secret.startswith("whsec_"), True)
    expect("the endpoint's events", created.events, [event("connection.created")])
    listed = w.call("webhooks", "list_webhooks", 200, "Webhook")
    expect("endpoints listed", [each.id for each in listed], [created.id])
    shown = w.call("webhooks", "get_webhook", 200, "Webhook", webhook_id=created.id)
    expect(
        "the endpoint shown",
        (shown.url, shown.enabled, shown.disabled_reason, shown.description),
        (hooks.url, True, None, "ops"),
    )
    return created


def delivered_events(w: Walk, hooks: Hooks, endpoint: Any) -> None:
    """A connection made, then a test event: each delivered, signed with the secret; the
    deliveries log, a page at a time; the test event sent again; a new secret, with which and
    with the previous one the next delivery is signed."""
    w.call(
        "services",
        "store_credentials",
        201,
        "ConnectedService",
        body=credentials(w, "gitlab", api_key="glpat-example"),
    )
    test = w.call("webhooks", "send_webhook_test_event", 202, "WebhookTest", webhook_id=endpoint.id)
    expect("the test event", (test.event_id[:4], str(test.type_)), ("evt_", "webhook.test"))
    made, tested = hooks.deliver("a connection and a test", 2)
    first = verified("the connection's event", made, endpoint.secret)
    expect(
        "the connection's event",
        (first["type"], first["data"]["service"]),
        ("connection.created", "gitlab"),
    )
    second = verified("the test event", tested, endpoint.secret)
    expect("the test event's id", event_id_of(tested), test.event_id)
    expect("the test event's data", second["data"]["webhookId"], endpoint.id)
    expect("sequence", second["data"]["sequence"] > first["data"]["sequence"], True)

    newest = w.call(
        "webhooks",
        "list_webhook_deliveries",
        200,
        "WebhookAttemptPage",
        webhook_id=endpoint.id,
        limit=1,
    )
    [attempt] = newest.deliveries
    expect(
        "the newest attempt",
        (attempt.event_id, str(attempt.type_), attempt.status, attempt.error),
        (test.event_id, "webhook.test", 200, None),
    )
    older = w.call(
        "webhooks",
        "list_webhook_deliveries",
        200,
        "WebhookAttemptPage",
        webhook_id=endpoint.id,
        before=newest.next_,
    )
    expect("the older attempts", [str(a.type_) for a in older.deliveries], ["connection.created"])
    expect("the last page", older.next_, None)

    again = w.call(
        "webhooks", "redeliver_webhook_event", 202, "WebhookRedelivery", event_id=test.event_id
    )
    expect("redelivery", (again.event_id, again.queued), (test.event_id, 1))
    [resent] = hooks.deliver("a redelivery", 1)
    verified("the test event sent again", resent, endpoint.secret)
    expect("the same event id", event_id_of(resent), test.event_id)

    rotated = w.call(
        "webhooks", "rotate_webhook_secret", 201, "WebhookSecret", webhook_id=endpoint.id
    )
    expect("a new secret", rotated.secret != endpoint.secret, True)
    w.call("webhooks", "send_webhook_test_event", 202, "WebhookTest", webhook_id=endpoint.id)
    [signed] = hooks.deliver("after a new secret", 1)
    verified("after a new secret", signed, rotated.secret, endpoint.secret)
    w.call("services", "remove_service", 204, None, service="gitlab")


def webhook_changes(w: Walk, hooks: Hooks, endpoint: Any) -> None:
    """Its events and description changed and the endpoint disabled: a test event waits; it
    is sent once the endpoint is enabled again."""
    event = w.model("EventType")
    types = [event("connection.created"), event("connection.removed")]
    changed = w.call(
        "webhooks",
        "update_webhook",
        200,
        "Webhook",
        webhook_id=endpoint.id,
        body=w.model("PatchedWebhookChange")(
            events=types, description="ops, paused", enabled=False
        ),
    )
    expect(
        "the endpoint changed",
        (changed.events, changed.description, changed.enabled, changed.disabled_reason),
        (types, "ops, paused", False, "disabled by the account"),
    )
    paused = w.call(
        "webhooks", "send_webhook_test_event", 202, "WebhookTest", webhook_id=endpoint.id
    )
    hooks.deliver("to a disabled endpoint", 0)
    resumed = w.call(
        "webhooks",
        "update_webhook",
        200,
        "Webhook",
        webhook_id=endpoint.id,
        body=w.model("PatchedWebhookChange")(enabled=True),
    )
    expect("the endpoint resumed", (resumed.enabled, resumed.disabled_reason), (True, None))
    [waited] = hooks.deliver("once resumed", 1)
    expect("what waited", event_id_of(waited), paused.event_id)


def webhook_problems(w: Walk, hooks: Hooks, webhook_id: str) -> None:
    """An unknown event type, at creation and in a change; the eleventh endpoint; an unknown
    endpoint and an unknown event."""
    unknown = {"events": ["connection.created", "nope.never"]}
    for operation, kwargs in [
        ("create_webhook", {"body": AsSent({"url": hooks.url, **unknown})}),
        ("update_webhook", {"body": AsSent(unknown), "webhook_id": webhook_id}),
    ]:
        refused = w.problem("webhooks", operation, 400, "unknown_event_type", **kwargs)
        expect(f"{operation}: the field refused", [e.field for e in refused.errors], ["events"])
    more = [
        w.call(
            "webhooks",
            "create_webhook",
            201,
            "WebhookCreated",
            body=w.model("WebhookInput")(url=f"{hooks.url}/{number}"),
        )
        for number in range(2, 11)
    ]
    w.problem(
        "webhooks",
        "create_webhook",
        409,
        "webhook_limit_reached",
        body=w.model("WebhookInput")(url=f"{hooks.url}/11"),
    )
    for each in more:
        w.call("webhooks", "delete_webhook", 204, None, webhook_id=each.id)
    w.problem("webhooks", "get_webhook", 404, "webhook_not_found", webhook_id="wh_unknown")
    w.problem(
        "webhooks",
        "redeliver_webhook_event",
        404,
        "webhook_event_not_found",
        event_id="evt_unknown",
    )


def audit_pages(w: Walk) -> tuple[int, int]:
    """Every audit event, five a page, newest first and without a gap; (pages, events)."""
    seen: list[int] = []
    cursor: dict[str, str] = {}
    pages = 0
    while True:
        page = w.call("audit", "list_audit_events", 200, "AuditPage", limit=5, **cursor)
        pages += 1
        seen += [event.seq for event in page.events]
        actions = w.model("AuditAction")
        if not all(isinstance(event.action, actions) for event in page.events):
            raise Mismatch("list_audit_events: an action outside the AuditAction enum")
        if page.next_ is None:
            break
        cursor = {"before": page.next_}
    expect("audit pages, newest first, no gap", seen, list(range(len(seen), 0, -1)))
    return pages, len(seen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    for path in WORK.glob("walk.sqlite3*"):
        path.unlink()
    provider = ProviderServer().start()
    provider.answer(401, {"message": "Bad credentials"})
    receiver = ProviderServer().start()
    env = server_env(
        f"sqlite:///{WORK / 'walk.sqlite3'}",
        CREDVAULT_PROVIDER_BASE_URLS=every_provider_at(provider.url),
        CREDVAULT_WEBHOOK_ALLOWED_HOSTS=receiver.url.removeprefix("http://"),
    )
    token = migrated_account(env, "walk")
    generated = Path(tempfile.mkdtemp(prefix="generated-", dir=WORK))
    try:
        with Gunicorn(env, workers=2, log=WORK / "gunicorn.log") as server:
            status, _, document = request("GET", f"{server.url}/api/v1/schema?format=json")
            if status != 200:
                raise Mismatch(f"GET /api/v1/schema answered {status}")
            generate(document, generated)
            sys.path.insert(0, str(generated))
            w = Walk(importlib.import_module(PACKAGE), server.url, token)
            pages, events = walk(w, Hooks(receiver, env))
        operations = {
            operation["operationId"]
            for item in json.loads(document)["paths"].values()
            for operation in item.values()
            if isinstance(operation, dict) and "operationId" in operation
        }
        missed = operations - set(w.calls)
        if missed:
            raise Mismatch(f"operations the walk never called: {', '.join(sorted(missed))}")
    except Mismatch as mismatch:
        print(f"client walk: MISMATCH: {mismatch}")
        return 1
    finally:
        provider.stop()
        receiver.stop()
        shutil.rmtree(generated, ignore_errors=True)
    print(
        f"client walk: {sum(w.calls.values())} calls over all {len(operations)} operations "
        f"through the generated client, every answer as documented; {pages} audit pages "
        f"of {events} events"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
