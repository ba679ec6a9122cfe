"""The approval page with Django's test client, CSRF enforced as a browser meets it: who sees
what (a member of the account; signed out, another account's member, staff, a token: nothing of
the request), what it shows (escaped, control characters spelled out, the body as stored:
redacted and cut), the decisions (Allow once, for 30 minutes, Deny) and their effect on the
agent's repeat, a decided or expired approval, a refused CSRF check, the headers."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from services import agents
from services.audit import Actor
from services.models import Approval, ApprovalKind, ApprovalStatus, AuditEvent, Grant, Member
from tests.support.helpers import (
    agent_token,
    agent_with_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)

EMAIL = "person@example.com"
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def member_of(account, email: str) -> User:
    user = User.objects.create_user(username=email, email=email, password=None)
    Member.objects.create(account=account, user=user)
    return user


def signed_in(user: User) -> Client:
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def person(alice) -> Client:
    return signed_in(member_of(alice, EMAIL))


def page_url(approval_id: str) -> str:
    return f"/approvals/{approval_id}"


def csrf_token(page) -> str:
    return re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)[1].decode()


def decide(client: Client, approval_id: str, decision: str, **fields):
    """What the browser does: the page, then its form posted with its CSRF token."""
    page = client.get(page_url(approval_id))
    assert page.status_code == 200, page.content
    form = {"csrfmiddlewaretoken": csrf_token(page), "decision": decision, **fields}
    return client.post(page_url(approval_id), form)


def text(response) -> str:
    return response.content.decode()


def pending_call(account, **fields) -> Approval:
    """A pending approval of a call by the account's agent `triage-agent`, as the gate makes
    one."""
    agent = account.agents.filter(name="triage-agent").first()
    if agent is None:
        agent = agent_with_token(account, "triage-agent", ["github"]).agent
    now = timezone.now()
    values = {
        "account": account,
        "agent": agent,
        "kind": ApprovalKind.CALL,
        "created_at": now,
        "expires_at": now + timedelta(minutes=15),
        "service": "github",
        "method": "POST",
        "path": "/repos/octo/hello/issues",
        "query": "labels=bug",
        "body_shown": '{"title": "Deploy failed"}',
        "digest": "0" * 64,
        "rule": {"methods": ["POST"], "paths": ["/repos"]},
        **fields,
    }
    return Approval.objects.create(**values)


def pending_access(account, **fields) -> Approval:
    agent = account.agents.filter(name="triage-agent").first()
    if agent is None:
        agent = agent_with_token(account, "triage-agent", ["github"]).agent
    now = timezone.now()
    grant = {"access": "proxy", "base": "", "graphql": []}
    values = {
        "account": account,
        "agent": agent,
        "kind": ApprovalKind.ACCESS,
        "created_at": now,
        "expires_at": now + timedelta(hours=24),
        "services": [
            {**grant, "service": "openai", "methods": ["POST"], "paths": ["/v1/chat"]},
            {**grant, "service": "slack", "methods": ["GET"], "paths": ["/"], "access": "read"},
        ],
        "reason": "To summarize the incident channel.",
        "valid_for_minutes": 120,
        **fields,
    }
    return Approval.objects.create(**values)


@pytest.fixture
def guarded(alice_api, provider_server):
    """Alice's github set (a marked value) and agent `triage-agent`, whose POSTs under /repos
    need an approval: (the agent's token, the stored value)."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "triage-agent", ["github"], access=None).status_code == 201
    Grant.objects.filter(agent__name="triage-agent").update(
        approve=[{"methods": ["POST"], "paths": ["/repos"]}]
    )
    return agent_token(alice_api, "triage-agent"), value


def ask(token: str, body: bytes = b'{"title": "Deploy failed"}') -> str:
    """The agent's call, refused for an approval: the approval's id."""
    asked = call(token, "POST", "github", "/repos/octo/hello/issues", body=body)
    return assert_problem(asked, 403, "approval_required")["approvalId"]


def repeat(token: str, body: bytes = b'{"title": "Deploy failed"}'):
    return call(token, "POST", "github", "/repos/octo/hello/issues", body=body)


NOTHING_OF_THE_REQUEST = ("triage-agent", "/repos/octo/hello/issues", "Deploy failed", "labels=bug")


def assert_shows_nothing_of_the_request(response) -> None:
    for shown in NOTHING_OF_THE_REQUEST:
        assert shown not in text(response)


@pytest.mark.django_db
class TestWhoSeesWhat:
    def test_a_signed_out_visitor_gets_the_sign_in_page_the_same_for_any_id(self, alice):
        approval = pending_call(alice)
        visitor = Client(enforce_csrf_checks=True)
        page = visitor.get(page_url(approval.id))
        assert page.status_code == 200
        assert "Sign in to see this request" in text(page)
        assert f'href="/account/login?next=%2Fapprovals%2F{approval.id}"' in text(page)
        assert_shows_nothing_of_the_request(page)
        unknown = visitor.get(page_url("apv_unknown"))
        assert unknown.status_code == 200
        assert text(unknown).replace("apv_unknown", approval.id) == text(page)

    def test_a_signed_out_post_decides_nothing(self, alice):
        approval = pending_call(alice)
        posted = Client().post(page_url(approval.id), {"decision": "once"})
        assert posted.status_code == 403
        assert "Sign in to see this request" in text(posted)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING

    def test_another_accounts_member_gets_the_page_of_an_unknown_id(self, alice, bob):
        approval = pending_call(alice)
        bob_person = signed_in(member_of(bob, "bob@example.com"))
        page = bob_person.get(page_url(approval.id))
        unknown = bob_person.get(page_url("apv_" + "x" * 22))
        assert page.status_code == unknown.status_code == 404
        assert page.content == unknown.content
        assert "Nothing here" in text(page)
        assert_shows_nothing_of_the_request(page)
        # A decision posted past the CSRF check (the test client's default) finds nothing too.
        bob_form = Client(raise_request_exception=False)
        bob_form.force_login(User.objects.get(email="bob@example.com"))
        denied = bob_form.post(page_url(approval.id), {"decision": "deny"})
        assert denied.status_code == 404
        assert denied.content == unknown.content
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING

    def test_a_staff_user_who_is_not_a_member_gets_the_sign_in_page(self, alice):
        approval = pending_call(alice)
        staff = User.objects.create_superuser("staff", "staff@example.com", "pw-staff-123456")
        page = signed_in(staff).get(page_url(approval.id))
        assert page.status_code == 200
        assert "Sign in to see this request" in text(page)
        assert_shows_nothing_of_the_request(page)

    @pytest.mark.parametrize("which", ["agent", "account"])
    def test_a_request_with_a_token_gets_nothing_even_with_a_members_session(
        self, alice, alice_account_and_token, person, django_assert_num_queries, which
    ):
        approval = pending_call(alice)
        token = (
            alice_account_and_token[1]
            if which == "account"
            else agent_token_of(alice, approval.agent.name)
        )
        with django_assert_num_queries(0):  # nothing looked up: not the session, nor the id
            page = person.get(page_url(approval.id), headers={"Authorization": f"Bearer {token}"})
        assert page.status_code == 403
        assert "This page is for people" in text(page)
        assert_shows_nothing_of_the_request(page)
        posted = person.post(
            page_url(approval.id),
            {"decision": "once"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert posted.status_code == 403
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING


def agent_token_of(account, name: str) -> str:
    actor = Actor.command(account.pk)
    return agents.issue_agent_token(actor=actor, name=name).issued.plaintext


@pytest.mark.django_db
class TestWhatItShows:
    def test_a_member_sees_the_call_and_the_three_buttons(self, alice, person):
        approval = pending_call(alice)
        page = person.get(page_url(approval.id))
        assert page.status_code == 200
        body = text(page)
        for shown in (
            "Agent <code>triage-agent</code> asks to call <code>github</code>",
            "<code>POST /repos/octo/hello/issues</code>",
            "<code>labels=bug</code>",
            "{&quot;title&quot;: &quot;Deploy failed&quot;}",
            "asks a person for POST under /repos.",
            f"Signed in as <strong>{EMAIL}</strong>, account <strong>alice</strong>",
            "Asked at",
            "Waits until",
            '<span class="badge pending">pending</span>',
            'value="once">Allow once</button>',
            'value="minutes">Allow for 30 minutes</button>',
            'value="deny">Deny</button>',
        ):
            assert shown in body, shown
        assert "Cut at 4 KiB" not in body
        assert approval.digest not in body

    def test_the_headers_forbid_caching_scripts_loads_and_frames(self, alice, person):
        page = person.get(page_url(pending_call(alice).id))
        assert page["Cache-Control"] == "no-store"
        assert page["X-Frame-Options"] == "DENY"
        policy = page["Content-Security-Policy"]
        assert "default-src 'none'" in policy
        assert "frame-ancestors 'none'" in policy
        assert "form-action 'self'" in policy
        assert "script-src" not in policy
        assert page["Referrer-Policy"] == "same-origin"
        assert page["Content-Type"] == "text/html; charset=utf-8"
        assert "<script" not in text(page)
        assert not re.search(r'(src|href)="(https?:)?//', text(page))

    def test_every_answer_of_the_page_carries_the_headers(self, alice, person):
        approval = pending_call(alice)
        answers = [
            Client().get(page_url(approval.id)),
            person.get(page_url("apv_unknown")),
            person.post(page_url(approval.id), {"decision": "once"}),  # no CSRF token
            person.get(page_url(approval.id), headers={"Authorization": "Bearer x"}),
        ]
        for answer in answers:
            assert answer["Cache-Control"] == "no-store"
            assert answer["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in answer["Content-Security-Policy"]

    def test_a_body_holding_html_and_a_script_renders_as_text(self, alice, person):
        approval = pending_call(
            alice, body_shown=HOSTILE, query="q=" + HOSTILE, path="/r/" + HOSTILE
        )
        body = text(person.get(page_url(approval.id)))
        assert "<script>" not in body
        assert "<img" not in body
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
        assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in body

    def test_invisible_and_reordering_characters_are_spelled_out(self, alice, person):
        approval = pending_call(
            alice, path="/repos/octo/\u202egnp.exe", body_shown="a\u200bb\x1b[2Jc\nd"
        )
        body = text(person.get(page_url(approval.id)))
        assert "/repos/octo/⟨U+202E⟩gnp.exe" in body
        assert "a⟨U+200B⟩b⟨U+001B⟩[2Jc\nd" in body
        assert "\u202e" not in body
        assert "\x1b" not in body

    def test_a_cut_body_says_so(self, alice, person):
        approval = pending_call(alice, body_shown="x" * 4096, body_cut=True)
        body = text(person.get(page_url(approval.id)))
        assert "Cut at 4 KiB" in body
        assert "x" * 4096 in body

    def test_the_accounts_stored_values_never_show(self, guarded, person):
        token, value = guarded
        approval_id = ask(token, body=f'{{"note": "{value}", "q": 1}}'.encode())
        page = person.get(page_url(approval_id))
        assert page.status_code == 200
        assert value not in text(page)
        assert "[REDACTED]" in text(page)

    def test_an_access_request_shows_the_grants_and_the_reason_escaped(self, alice, person):
        approval = pending_access(alice, reason="Because " + HOSTILE)
        page = person.get(page_url(approval.id))
        assert page.status_code == 200
        body = text(page)
        for shown in (
            "Agent <code>triage-agent</code> asks for access",
            "Because &lt;script&gt;alert(1)&lt;/script&gt;",
            "<code>openai</code>",
            "<code>slack</code>",
            "brokered calls and reading the credential itself",
            "/v1/chat",
            "every base",
            "for 2 hours from the approval",
            'name="service" value="openai"',
            'name="service" value="slack"',
            'name="valid_for_minutes"',
            'value="approve">Approve</button>',
            'value="deny">Deny</button>',
        ):
            assert shown in body, shown
        assert "<script>" not in body
        assert "Allow once" not in body

    def test_the_page_costs_five_queries(self, alice, person, django_assert_num_queries):
        approval = pending_call(alice)
        # The session, its user, the member with its account, the approval, its agent.
        with django_assert_num_queries(5):
            assert person.get(page_url(approval.id)).status_code == 200

    def test_head_answers_the_headers_of_the_page(self, alice, person):
        head = person.head(page_url(pending_call(alice).id))
        assert head.status_code == 200
        assert head.content == b""
        assert head["Cache-Control"] == "no-store"

    def test_other_methods_are_not_allowed(self, alice):
        past_csrf = Client()  # the CSRF check answers an unsafe method first (403)
        past_csrf.force_login(member_of(alice, EMAIL))
        assert past_csrf.put(page_url(pending_call(alice).id)).status_code == 405


@pytest.mark.django_db
class TestDeciding:
    def test_allow_once_lets_exactly_the_agents_repeat_through(
        self, guarded, person, provider_server
    ):
        token, _ = guarded
        provider_server.answer(201, {"id": 1})
        approval_id = ask(token)
        decided = decide(person, approval_id, "once")
        assert decided.status_code == 303
        assert decided["Location"] == page_url(approval_id)
        assert decided["Cache-Control"] == "no-store"
        approval = Approval.objects.get(id=approval_id)
        assert approval.status == ApprovalStatus.APPROVED
        assert approval.decided_by == EMAIL
        assert approval.allowed_until is None
        event = AuditEvent.objects.get(action="approval.approved")
        assert event.member == EMAIL
        assert event.target == approval_id
        page = text(person.get(page_url(approval_id)))
        assert f"Allowed once by {EMAIL} at " in page
        assert "goes through once, until" in page
        assert "<form" not in page
        assert repeat(token).status_code == 201
        assert len(provider_server.requests) == 1
        assert_problem(repeat(token), 403, "approval_required")
        page = text(person.get(page_url(approval_id)))
        assert "The agent&#x27;s call went through at " in page

    def test_allow_for_30_minutes_covers_the_rule_for_30_minutes(
        self, guarded, person, provider_server
    ):
        token, _ = guarded
        provider_server.answer(201, {"id": 1})
        approval_id = ask(token)
        assert decide(person, approval_id, "minutes").status_code == 303
        approval = Approval.objects.get(id=approval_id)
        assert approval.allowed_until - approval.decided_at == timedelta(minutes=30)
        assert repeat(token).status_code == 201
        assert repeat(token, body=b'{"title": "another"}').status_code == 201
        page = text(person.get(page_url(approval_id)))
        assert f"Allowed for 30 minutes by {EMAIL} at " in page
        assert "(POST under /repos) go through until" in page

    def test_deny_refuses_the_agents_repeat(self, guarded, person, provider_server):
        token, _ = guarded
        approval_id = ask(token)
        assert decide(person, approval_id, "deny").status_code == 303
        assert_problem(repeat(token), 403, "approval_denied")
        assert provider_server.requests == []
        assert AuditEvent.objects.get(action="approval.denied").member == EMAIL
        page = person.get(page_url(approval_id))
        assert f"Denied by {EMAIL} at " in text(page)
        assert '<span class="badge denied">denied</span>' in text(page)
        assert "<form" not in text(page)

    def test_a_second_decision_is_a_409_page_and_changes_nothing(self, alice, person):
        approval = pending_call(alice)
        page = person.get(page_url(approval.id))
        token = csrf_token(page)
        first = person.post(
            page_url(approval.id), {"csrfmiddlewaretoken": token, "decision": "deny"}
        )
        assert first.status_code == 303
        second = person.post(
            page_url(approval.id), {"csrfmiddlewaretoken": token, "decision": "once"}
        )
        assert second.status_code == 409
        assert second["Content-Type"] == "text/html; charset=utf-8"
        assert "was decided already" in text(second)
        assert f"Denied by {EMAIL}" in text(second)
        assert "<button" not in text(second)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.DENIED
        assert AuditEvent.objects.filter(action="approval.approved").count() == 0

    def test_an_expired_approval_shows_so_and_cannot_be_decided(self, alice, person):
        approval = pending_call(alice)
        page = person.get(page_url(approval.id))
        token = csrf_token(page)
        Approval.objects.filter(id=approval.id).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        page = person.get(page_url(approval.id))
        assert page.status_code == 200
        assert '<span class="badge expired">expired</span>' in text(page)
        assert "Nobody decided before" in text(page)
        assert "<button" not in text(page)
        posted = person.post(
            page_url(approval.id), {"csrfmiddlewaretoken": token, "decision": "once"}
        )
        assert posted.status_code == 409
        assert "Nobody decided before" in text(posted)
        approval.refresh_from_db()
        assert approval.status != ApprovalStatus.APPROVED

    def test_a_post_without_its_csrf_token_is_a_403_page(self, alice, person):
        approval = pending_call(alice)
        person.get(page_url(approval.id))  # the CSRF cookie is set; the form's token not sent
        posted = person.post(page_url(approval.id), {"decision": "once"})
        assert posted.status_code == 403
        assert posted["Content-Type"] == "text/html; charset=utf-8"
        assert "could not be checked" in text(posted)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING

    def test_a_post_from_another_origin_is_refused(self, alice, person):
        approval = pending_call(alice)
        token = csrf_token(person.get(page_url(approval.id)))
        posted = person.post(
            page_url(approval.id),
            {"csrfmiddlewaretoken": token, "decision": "once"},
            headers={"Origin": "https://look-alike.example"},
        )
        assert posted.status_code == 403
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING

    @pytest.mark.parametrize("decision", ["", "bogus", "approve"])
    def test_a_decision_the_call_does_not_have_is_a_400_page(self, alice, person, decision):
        approval = pending_call(alice)
        posted = decide(person, approval.id, decision)
        assert posted.status_code == 400
        assert "Choose one of the buttons. Nothing was decided." in text(posted)
        assert "Allow once" in text(posted)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING

    def test_an_access_request_is_denied_on_the_page(self, alice, person):
        approval = pending_access(alice)
        assert decide(person, approval.id, "deny").status_code == 303
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.DENIED
        assert AuditEvent.objects.get(action="access_request.denied").member == EMAIL
        page = text(person.get(page_url(approval.id)))
        assert f"Denied by {EMAIL}" in page
        assert "<code>openai</code>" in page  # what was asked stays shown
        assert 'type="checkbox"' not in page

    def test_an_access_request_keeps_at_least_one_service(self, alice, person):
        approval = pending_access(alice)
        posted = decide(person, approval.id, "approve")  # every box unticked
        assert posted.status_code == 400
        assert "Keep at least one service, or deny the request." in text(posted)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.PENDING

    def test_an_access_request_is_approved_narrower_on_the_page(self, alice, person):
        approval = pending_access(alice)
        person.raise_request_exception = True
        decided = decide(person, approval.id, "approve", service=["openai"], valid_for_minutes="60")
        assert decided.status_code == 303
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.APPROVED
        assert [entry["service"] for entry in approval.granted] == ["openai"]
        grant = Grant.objects.get(agent=approval.agent, service="openai")
        assert grant.expires_at is not None
        assert not Grant.objects.filter(agent=approval.agent, service="slack").exists()
        event = AuditEvent.objects.get(action="access_request.approved")
        assert event.member == EMAIL
        page = text(person.get(page_url(approval.id)))
        assert f"Approved by {EMAIL} at " in page
        assert "granted openai" in page

    def test_an_access_request_is_approved_as_asked_on_the_page(self, alice, person):
        approval = pending_access(alice)
        person.raise_request_exception = True
        decided = decide(person, approval.id, "approve", service=["openai", "slack"])
        assert decided.status_code == 303
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.APPROVED
        assert [entry["service"] for entry in approval.granted] == ["openai", "slack"]
        assert approval.allowed_until - approval.decided_at == timedelta(minutes=120)
        page = text(person.get(page_url(approval.id)))
        assert "granted openai, slack" in page
        assert "The access ends at " in page
