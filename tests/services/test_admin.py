"""The admin as staff see it: each token's real status, moments to the second
in UTC, objects titled by name, a filter by account, each grant once, the key id of each stored
field, and a per-account overview made in a constant number of queries.

What the admin must never show (values, ciphertext, digests) is tested in
tests/services/test_leaks.py.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from services import bearer_tokens
from services.accounts import (
    create_account,
    expire_token,
    issue_token,
    revoke_token,
    set_account_active,
)
from services.agents import delete_agent, issue_agent_token, put_agent
from services.audit import Actor
from services.grants import ApproveRule, GrantSpec, given_in_list
from services.management.listing import live_tokens, token_status
from services.models import (
    Account,
    Agent,
    AgentToken,
    ApiToken,
    AuditEvent,
    ConnectedService,
    CredentialField,
    DataKey,
    Grant,
)
from tests.support.helpers import agent_with_token, store_set

CHANGELISTS = {
    "API tokens": "/admin/services/apitoken/",
    "agent tokens": "/admin/services/agenttoken/",
    "connected services": "/admin/services/connectedservice/",
    "agents": "/admin/services/agent/",
    "audit events": "/admin/services/auditevent/",
}


@pytest.fixture
def staff(db) -> Client:
    user = User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def row_of(html: str, text: str) -> str:
    """The one row of a list page's results that holds `text`."""
    results = html[html.index('id="result_list"') :]
    rows = [row for row in re.findall(r"<tr[^>]*>.*?</tr>", results, re.DOTALL) if text in row]
    assert len(rows) == 1, (text, rows)
    return rows[0]


def cell(row: str, column: str) -> str:
    found = re.search(rf'<td class="field-{column}[^"]*">(.*?)</td>', row, re.DOTALL)
    assert found, (column, row)
    return found.group(1).strip()


def readonly(html: str, field: str) -> str:
    """The shown value of a field of a detail page."""
    found = re.search(
        rf'<div class="[^"]*field-{field}\b.*?<div class="readonly">(.*?)</div>', html, re.DOTALL
    )
    assert found, field
    return found.group(1).strip()


def utc(moment: datetime) -> str:
    """A moment as the admin shows it: to the second, in UTC, the zone joined to the time by
    a no-break space (a narrow column wraps between the date and the time only)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S\u00a0UTC")


@pytest.fixture
def tokens_in_every_state(alice, bob):
    """Alice's tokens, one in each status; Bob's account deactivated with a token left."""
    active = ApiToken.objects.get(account=alice)
    revoked = issue_token(account=alice, name="to revoke").token
    revoke_token(prefix=revoked.prefix)
    expired = issue_token(account=alice, name="to expire").token
    expire_token(prefix=expired.prefix, expires_in=timedelta(0))
    inactive = ApiToken.objects.get(account=bob)

    agent_active = agent_with_token(alice, "bot", ["github"])
    agent_revoked = issue_agent_token(actor=Actor.command(alice.pk), name="bot").issued.token
    revoke_token(prefix=agent_revoked.prefix)
    agent_expired = issue_agent_token(actor=Actor.command(alice.pk), name="bot").issued.token
    expire_token(prefix=agent_expired.prefix, expires_in=timedelta(0))
    agent_deleted = agent_with_token(alice, "gone", ["github"])
    delete_agent(actor=Actor.command(alice.pk), name="gone")
    agent_inactive = agent_with_token(bob, "bobs-bot", ["slack"])
    set_account_active(account=bob, active=False)
    return {
        "active": [active, agent_active],
        "revoked": [revoked, agent_revoked],
        "expired": [expired, agent_expired],
        "account inactive": [inactive, agent_inactive],
        "agent deleted": [agent_deleted],
    }


@pytest.mark.django_db
def test_token_lists_and_pages_show_each_tokens_real_status(staff, tokens_in_every_state):
    lists = {
        ApiToken: page(staff, CHANGELISTS["API tokens"]),
        AgentToken: page(staff, CHANGELISTS["agent tokens"]),
    }
    for status, shown_tokens in tokens_in_every_state.items():
        for token in shown_tokens:
            assert cell(row_of(lists[type(token)], token.prefix), "status") == status
            url = f"/admin/services/{type(token)._meta.model_name}/{token.pk}/change/"
            assert readonly(page(staff, url), "status") == status


@pytest.mark.django_db
def test_live_tokens_are_those_whose_status_is_active(tokens_in_every_state):
    now = timezone.now()
    statuses = set()
    for model in (ApiToken, AgentToken):
        every = list(model.objects.select_related("account"))
        statuses |= {token_status(token, now) for token in every}
        active = {token.pk for token in every if token_status(token, now) == "active"}
        assert set(live_tokens(model.objects.all(), now).values_list("pk", flat=True)) == active
    assert statuses == set(tokens_in_every_state)


@pytest.mark.django_db
def test_moments_are_shown_to_the_second_in_utc(staff, alice_api):
    moment = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    shown = "2026-03-04 05:06:07\u00a0UTC"
    assert utc(moment) == shown
    token = ApiToken.objects.get(digest=bearer_tokens.digest(alice_api.token))
    ApiToken.objects.filter(pk=token.pk).update(
        created_at=moment, last_used_at=moment + timedelta(seconds=1)
    )
    listed = row_of(page(staff, CHANGELISTS["API tokens"]), token.prefix)
    assert cell(listed, "created_at") == shown
    assert cell(listed, "last_used_at") == "2026-03-04 05:06:08\u00a0UTC"
    detail = page(staff, f"/admin/services/apitoken/{token.pk}/change/")
    assert readonly(detail, "created_at") == shown

    event = AuditEvent.objects.get()
    occurred = utc(event.occurred_at)
    assert row_of(page(staff, CHANGELISTS["audit events"]), occurred)
    detail = page(staff, f"/admin/services/auditevent/{event.pk}/change/")
    assert readonly(detail, "occurred_at") == occurred


@pytest.mark.django_db
def test_the_audit_list_is_newest_first_and_names_actions_as_the_api_does(staff, alice, bob):
    revoke_token(prefix=ApiToken.objects.get(account=bob).prefix, staff="staff")
    listed = page(staff, CHANGELISTS["audit events"])
    results = listed[listed.index('id="result_list"') :]
    newest = re.findall(r"<tbody>\s*(<tr[^>]*>.*?</tr>)", results, re.DOTALL)[0]
    assert cell(newest, "account") == "bob"
    assert cell(newest, "action") == "tokens.revoke"
    assert cell(newest, "result") == "success 204"
    assert cell(newest, "actor") == "admin"
    assert 'href="?action__exact=tokens.revoke">tokens.revoke</a>' in listed


@pytest.mark.django_db
def test_every_object_is_titled_by_name_never_by_id_alone(staff, alice):
    store_set(alice, "after-rotation", api_key="v")
    agent_token = agent_with_token(alice, "bot", ["after-rotation"])
    service = ConnectedService.objects.get()
    event = AuditEvent.objects.filter(action="services.store").get()
    expected = {
        alice: "alice",
        ApiToken.objects.get(): ApiToken.objects.get().prefix,
        agent_token: agent_token.prefix,
        service: "alice/after-rotation",
        CredentialField.objects.get(): "api_key",
        Agent.objects.get(): "bot",
        Grant.objects.get(): "after-rotation",
        event: f"alice #{event.seq} services.store success",
    }
    for obj, title in expected.items():
        assert str(obj) == title
    for obj in (alice, service, event, agent_token, Agent.objects.get()):
        detail = page(staff, f"/admin/services/{obj._meta.model_name}/{obj.pk}/change/")
        assert f"<title>{expected[obj]} | View " in detail
        assert f"<h2>{expected[obj]}</h2>" in detail


@pytest.fixture
def two_accounts_of_everything(alice, bob):
    """Each account with a service, an agent with a token, and audit events."""
    for account in (alice, bob):
        store_set(account, f"{account.name}-svc", api_key="v")
        agent_with_token(account, f"{account.name}-bot", [f"{account.name}-svc"])


def account_cells(html: str) -> set[str]:
    return set(re.findall(r'<td class="field-account[^"]*">([^<]*)</td>', html))


@pytest.mark.django_db
@pytest.mark.parametrize("listing", list(CHANGELISTS))
def test_each_list_filters_and_searches_by_account(staff, bob, two_accounts_of_everything, listing):
    url = CHANGELISTS[listing]
    everything = page(staff, url)
    assert 'data-filter-title="account"' in everything
    assert f'href="?account__id__exact={bob.pk}"' in everything
    assert account_cells(everything) == {"alice", "bob"}
    for only_bob in (f"{url}?account__id__exact={bob.pk}", f"{url}?q=bob"):
        assert account_cells(page(staff, only_bob)) == {"bob"}


@pytest.mark.django_db
def test_the_grants_inline_shows_each_service_once(staff, alice):
    put_agent(
        actor=Actor.command(alice.pk),
        name="bot",
        services=given_in_list([GrantSpec("zeta-one"), GrantSpec("alpha-two", methods=("GET",))]),
    )
    agent = Agent.objects.get()
    detail = page(staff, f"/admin/services/agent/{agent.pk}/change/")
    assert detail.count("zeta-one") == 1
    assert detail.count("alpha-two") == 1
    assert detail.index("alpha-two") < detail.index("zeta-one")


@pytest.mark.django_db
def test_a_service_page_shows_the_key_id_of_each_field_and_explains_generation(
    staff, alice, settings
):
    store_set(alice, "custom", api_key="v", client_secret="w")
    store_set(alice, "custom", api_key="v2", client_secret="w2")
    service = ConnectedService.objects.get()
    assert service.generation == 2
    # Each field names the version of alice's data key that sealed it.
    reference = DataKey.objects.get(account=alice).reference
    assert set(CredentialField.objects.values_list("key_id", flat=True)) == {reference}
    detail = page(staff, f"/admin/services/connectedservice/{service.pk}/change/")
    stored = readonly(detail, "stored_fields")
    assert stored == (
        f"api_key: key <code>{reference}</code><br>client_secret: key <code>{reference}</code>"
    )
    assert readonly(detail, "generation") == "2"
    assert "Rises by one with every store of this service" in detail
    assert "associated data" in detail


def make_account_with_activity(name: str) -> Account:
    """An account with 2 services, 2 agents (and a deleted one), 2 live account tokens of
    3, and 1 live agent token of 3."""
    account = create_account(name=name)
    store_set(account, "github", api_key="v")
    store_set(account, "slack", access_token="v")
    issue_token(account=account)
    issue_token(account=account)
    revoke_token(prefix=issue_token(account=account).token.prefix)
    agent_with_token(account, "bot", ["github"])
    revoke_token(prefix=agent_with_token(account, "other", ["slack"]).prefix)
    agent_with_token(account, "gone", [])
    delete_agent(actor=Actor.command(account.pk), name="gone")
    return account


@pytest.mark.django_db
def test_the_accounts_show_their_overview(staff):
    account = make_account_with_activity("acme")
    create_account(name="quiet")
    newest = AuditEvent.objects.filter(account=account).order_by("-seq").first()
    last = utc(newest.occurred_at)
    listed = page(staff, "/admin/services/account/")
    detail = page(staff, f"/admin/services/account/{account.pk}/change/")
    expected = {
        "service_count": "2",
        "agent_count": "2",
        "live_token_count": "2",
        "live_agent_token_count": "1",
        "last_activity": last,
    }
    for column, value in expected.items():
        assert cell(row_of(listed, ">acme<"), column) == value
        assert readonly(detail, column) == value
    quiet_row = row_of(listed, ">quiet<")
    assert cell(quiet_row, "service_count") == "0"
    assert cell(quiet_row, "last_activity") == "-"
    # A deactivated account has no live token.
    set_account_active(account=account, active=False)
    listed = page(staff, "/admin/services/account/")
    assert cell(row_of(listed, ">acme<"), "live_token_count") == "0"
    assert cell(row_of(listed, ">acme<"), "live_agent_token_count") == "0"


@pytest.mark.django_db
@pytest.mark.parametrize("accounts", [1, 8])
def test_the_accounts_list_is_constant_whatever_the_number_of_accounts(
    staff, django_assert_num_queries, accounts
):
    for index in range(accounts):
        make_account_with_activity(f"account-{index}")
    with django_assert_num_queries(5):
        # 1. SELECT the session
        # 2. SELECT the staff user
        # 3. SELECT COUNT(*) of the accounts the filters let through (the paginator)
        # 4. SELECT COUNT(*) of all accounts (the "N total" beside it)
        # 5. SELECT the accounts of the page, each with its five overview subqueries
        response = staff.get("/admin/services/account/")
    assert response.status_code == 200
    assert response.content.decode().count('class="field-service_count">2<') == accounts


@pytest.mark.django_db
def test_a_brokered_calls_event_shows_its_method_path_and_upstream_status(staff, alice):
    from services import audit
    from services.audit import Operation

    actor = Actor.command(alice.pk)
    audit.record(
        actor,
        Operation.PROXY_CALL,
        status=404,
        service="github",
        method="GET",
        path="/repos/o/missing",
        upstream_status=404,
    )
    event = AuditEvent.objects.get(action="agent.proxy")
    detail = page(staff, f"/admin/services/auditevent/{event.pk}/change/")
    assert readonly(detail, "method") == "GET"
    assert readonly(detail, "path") == "/repos/o/missing"
    assert readonly(detail, "upstream_status") == "404"


@pytest.mark.django_db
def test_the_grants_inline_shows_each_grants_access_methods_and_paths(staff, alice):
    put_agent(
        actor=Actor.command(alice.pk),
        name="bot",
        services=given_in_list(
            [GrantSpec.given("github", methods=["POST", "GET"], paths=["/user", "/repos"])]
        ),
    )
    detail = page(staff, f"/admin/services/agent/{Agent.objects.get().pk}/change/")
    assert "proxy: brokered calls only" in detail
    assert "GET, POST" in detail
    assert "/repos, /user" in detail


@pytest.mark.django_db
def test_the_grants_inline_shows_a_grants_base_and_graphql_mutations(staff, alice):
    put_agent(
        actor=Actor.command(alice.pk),
        name="bot",
        services=given_in_list(
            [
                GrantSpec.given("huggingface", base="router"),
                GrantSpec.given("linear", graphql=["webhookCreate", "apiKeyCreate"]),
            ]
        ),
    )
    detail = page(staff, f"/admin/services/agent/{Agent.objects.get().pk}/change/")
    assert "GraphQL mutations" in detail
    assert '<td class="field-base"><p>router</p></td>' in detail
    assert '<td class="field-allowed_mutations"><p>apiKeyCreate, webhookCreate</p></td>' in detail


def test_the_view_site_link_leads_to_a_real_page(staff):
    """Django's "View site" points at `/`, where credvault serves nothing (a 404): it leads to
    the interactive API docs instead, on every admin page."""
    for url in ["/admin/", *CHANGELISTS.values()]:
        [link] = re.findall(r'<a href="([^"]*)">View site</a>', page(staff, url))
        assert link == "/api/docs"
    response = staff.get(link)
    assert response.status_code == 200
    assert b"/api/v1/schema" in response.content


@pytest.mark.django_db
def test_the_grants_inline_shows_a_grants_expiry_and_approve_rules_read_only(staff, alice):
    expires = datetime(2999, 1, 2, 3, 4, 5, tzinfo=UTC)
    put_agent(
        actor=Actor.command(alice.pk),
        name="bot",
        services=given_in_list(
            [
                GrantSpec.given(
                    "github",
                    expires_at=expires,
                    approve=[
                        ApproveRule.given(methods=["DELETE", "POST"], paths=["/repos"]),
                        ApproveRule.given(paths=["/user/keys"]),
                        ApproveRule.given(),
                    ],
                ),
                GrantSpec.given("slack"),
            ]
        ),
    )
    detail = page(staff, f"/admin/services/agent/{Agent.objects.get().pk}/change/")
    assert "Calls that need approval" in detail
    assert utc(expires) in detail
    shown = re.findall(r'<td class="field-approval_rules"><p>(.*?)</p></td>', detail)
    assert shown == [
        "POST, DELETE under /repos; every method under /user/keys; every call",
        "",
    ]
    assert 'name="grants-0-expires_at' not in detail
    assert 'name="grants-0-approve' not in detail
