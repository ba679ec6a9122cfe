"""`delete_account ACCOUNT --yes`: crypto-shredding. Every value of the account and every
version of its data key are deleted, so a ciphertext copied before opens with nothing the live
database holds, in its own place or put into another account's row; the account row stays,
inactive, with its audit chain, which still verifies; its tokens are refused."""

from __future__ import annotations

import json
from dataclasses import dataclass
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from services import audit, checkpoints
from services.crypto import DecryptionError, Place
from services.keys import data_keys, envelope
from services.members import create_member
from services.models import (
    Account,
    Agent,
    AgentToken,
    ApiToken,
    AuditCheckpoint,
    AuditEvent,
    ConnectedService,
    DataKey,
    Member,
    OAuthClient,
    WebhookEndpoint,
    WebhookEvent,
)
from services.sealed import KINDS, SealedKind
from tests.support.helpers import Api, agent_token, creds, marked, put_agent, put_client, read


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@dataclass(frozen=True)
class Copied:
    """A sealed value copied out of its row before the deletion, with where it was bound."""

    kind: SealedKind
    row_id: Any
    key_id: str
    blob: bytes
    place: Place


@dataclass
class Filled:
    account: Account
    api: Api
    agent_token: str
    secrets: list[str]


def fill(account: Account, api: Api, settings) -> Filled:
    """One value of every sealed kind (a credential set, an OAuth client secret, a webhook
    endpoint's secret), an agent with a token, a member; through the API, as a person would."""
    settings.CREDVAULT_WEBHOOK_ALLOWED_HOSTS = "127.0.0.1"
    value, client_secret = marked(f"{account.name}-api-key"), marked(f"{account.name}-client")
    assert api.store("custom", creds(api_key=value)).status_code == 201
    assert put_client(api, "github", client_secret).status_code == 201
    hook = api.raw("POST", "/api/v1/webhooks", json.dumps({"url": "http://127.0.0.1:9/hook"}))
    assert hook.status_code == 201, hook.content
    put_agent(api, "bot", [{"service": "custom", "access": "read"}])
    token = agent_token(api, "bot")
    create_member(account=account, email=f"person@{account.name}.example.com")
    return Filled(account, api, token, [value, client_secret, hook.json()["secret"]])


def sealed_rows(kind: SealedKind, account: Account) -> list[Any]:
    rows = kind.model._default_manager.filter(**{kind.account: account.pk})
    return list(rows.select_related(*kind.related)) if kind.related else list(rows)


def copy_out(account: Account) -> list[Copied]:
    return [
        Copied(kind, row.pk, row.key_id, bytes(getattr(row, kind.ciphertext)), kind.place(row))
        for kind in KINDS
        for row in sealed_rows(kind, account)
    ]


@pytest.fixture
def two(alice, alice_api, bob, bob_api, settings) -> tuple[Filled, Filled]:
    return fill(alice, alice_api, settings), fill(bob, bob_api, settings)


def counts(account: Account) -> dict[str, int]:
    return {
        "values": sum(len(sealed_rows(kind, account)) for kind in KINDS),
        "data keys": DataKey.objects.filter(account=account).count(),
        "tokens": ApiToken.objects.filter(account=account).count()
        + AgentToken.objects.filter(account=account).count(),
        "agents": Agent.objects.filter(account=account).count(),
        "members": Member.objects.filter(account=account).count(),
        "services": ConnectedService.objects.filter(account=account).count(),
        "oauth clients": OAuthClient.objects.filter(account=account).count(),
        "webhook endpoints": WebhookEndpoint.objects.filter(account=account).count(),
        "events": AuditEvent.objects.filter(account=account).count(),
    }


@pytest.mark.django_db
def test_without_yes_it_says_what_it_would_delete_and_changes_nothing(two):
    alice = two[0].account
    before = counts(alice)
    with pytest.raises(CommandError) as refused:
        run("delete_account", "alice")
    message = str(refused.value)
    assert "\n" not in message
    assert "needs --yes" in message
    assert "3 values, its data key(s), its tokens" in message
    assert counts(alice) == before
    alice.refresh_from_db()
    assert alice.is_active
    assert alice.deleted_at is None
    assert two[0].api.list().status_code == 200


@pytest.mark.django_db
def test_an_unknown_account_is_one_line(db):
    with pytest.raises(CommandError, match=r"^no account named 'nobody'$"):
        run("delete_account", "nobody", "--yes")


@pytest.mark.django_db
def test_no_copied_ciphertext_opens_after_the_deletion(two, django_capture_on_commit_callbacks):
    alice, bob = two[0].account, two[1].account
    copied = copy_out(alice)
    assert {c.kind.name for c in copied} == {kind.name for kind in KINDS}
    wrapped = {bytes(row.wrapped) for row in DataKey.objects.filter(account=alice)}
    references = {row.reference for row in DataKey.objects.filter(account=alice)}
    assert wrapped
    assert references
    # Every copy opens before: the copies are of the real values.
    table = {c.row_id: c.kind.model._meta.db_table for c in copied}
    opened = {
        envelope.open(c.key_id, c.blob, c.place, field_id=c.row_id, table=table[c.row_id]).reveal()
        for c in copied
    }
    assert opened == set(two[0].secrets)
    data_keys.cache.put(
        next(iter(references)),
        data_keys.unwrap(DataKey.objects.filter(account=alice).first()),
        account_id=alice.pk,
        current=True,
    )

    with django_capture_on_commit_callbacks(execute=True):
        out, err = run("delete_account", "alice", "--yes")

    assert out == "alice deleted: 3 values, its data key(s) and its tokens; its audit chain stays\n"
    for secret in [*two[0].secrets, two[0].api.token, two[0].agent_token]:
        assert secret not in out + err
    # The process forgot the account's unwrapped keys once the deletion committed.
    assert data_keys.cache.current(alice.pk) is None
    data_keys.cache.clear()

    # Nothing of the account is left but its row and its audit.
    left = {name: n for name, n in counts(alice).items() if n}
    assert left == {"events": counts(alice)["events"]}
    assert not wrapped & {bytes(key.wrapped) for key in DataKey.objects.all()}
    assert not any(key.reference in references for key in DataKey.objects.all())
    assert not WebhookEvent.objects.filter(account=alice).exists()

    # In its own place, a copy names a data key the account no longer has.
    for c in copied:
        with pytest.raises(DecryptionError, match="names a data key that this account does not"):
            envelope.open(
                c.key_id, c.blob, c.place, field_id=c.row_id, table=c.kind.model._meta.db_table
            )

    # Bob's values still open; put into a row of bob's, a copy of alice's opens there with
    # neither alice's key reference nor bob's own.
    for kind in KINDS:
        for row in sealed_rows(kind, bob):
            assert kind.open(row).reveal() in two[1].secrets
    for c in copied:
        [row] = sealed_rows(c.kind, bob)
        for key_id in (c.key_id, row.key_id):
            setattr(row, c.kind.ciphertext, c.blob)
            row.key_id = key_id
            with pytest.raises(DecryptionError):
                c.kind.open(row)


@pytest.mark.django_db
def test_the_deleted_accounts_audit_chain_still_verifies(two):
    alice = two[0].account
    run("delete_account", "alice", "--yes")
    alice.refresh_from_db()
    assert not alice.is_active
    assert alice.deleted_at is not None
    count, broken = audit.verify_chain(alice)
    assert broken is None
    last = AuditEvent.objects.filter(account=alice).order_by("-seq").first()
    assert (last.action, last.token_prefix, last.seq) == ("accounts.delete", "cli", count)
    # The deletion's event is signed with it: a checkpoint at the chain's head.
    assert AuditCheckpoint.objects.filter(account=alice, seq=last.seq).exists()
    assert checkpoints.verify_checkpoints(alice)[1] is None
    out, _ = run("verify_audit", "alice")
    assert "alice" in out


@pytest.mark.django_db
def test_the_deleted_accounts_tokens_get_401(two):
    alice, bob = two
    run("delete_account", "alice", "--yes")
    assert alice.api.list().status_code == 401
    assert read(alice.agent_token, "custom").status_code == 401
    assert bob.api.list().status_code == 200
    assert read(bob.agent_token, "custom").status_code == 200


@pytest.mark.django_db
def test_its_members_go_and_their_users_unless_staff(two):
    staff = User.objects.create_user(username="staff@alice.example.com", is_staff=True)
    Member.objects.create(account=two[0].account, user=staff)
    run("delete_account", "alice", "--yes")
    assert not Member.objects.filter(account=two[0].account).exists()
    assert not User.objects.filter(username="person@alice.example.com").exists()
    assert User.objects.filter(pk=staff.pk).exists()
    assert User.objects.filter(username="person@bob.example.com").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reactivate_account", "alice"], "a deleted account cannot be reactivated"),
        (["create_account", "alice"], "its name stays taken by its audit chain"),
        (["issue_token", "alice"], "was deleted on"),
        (["issue_agent_token", "alice", "bot"], "was deleted on"),
        (["create_agent", "alice", "bot2"], "was deleted on"),
        (["create_member", "alice", "new@example.com"], "was deleted on"),
        (["delete_account", "alice", "--yes"], "only its audit chain is left"),
    ],
)
def test_a_deleted_account_gets_nothing_new(two, args, message):
    run("delete_account", "alice", "--yes")
    events = AuditEvent.objects.filter(account=two[0].account).count()
    with pytest.raises(CommandError, match=message) as refused:
        run(*args)
    assert "\n" not in str(refused.value)
    assert AuditEvent.objects.filter(account=two[0].account).count() == events
    account = Account.objects.get(name="alice")
    assert not account.is_active
    assert counts(account)["events"] == events
    assert sum(counts(account).values()) == events
