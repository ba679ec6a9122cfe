"""Signed audit checkpoints: a chain rewritten with database write access alone
(no CREDVAULT_AUDIT_KEYS, no SECRET_KEY) fails `verify_audit`, naming the checkpoint it
contradicts; a checkpoint kept outside the database (`--expect`) catches a rewrite of the
newest events; every event and checkpoint is one JSON line on the `credvault.audit` logger;
between checkpoints an event costs no query."""

from __future__ import annotations

import base64
import json
import logging
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from services import audit, checkpoints
from services.models import Account, AuditCheckpoint, AuditEvent
from tests.conftest import TEST_AUDIT_KEYS
from tests.support.helpers import audit_record_queries, creds

pytestmark = pytest.mark.django_db

OLD_AUDIT_KEYS = f"audit-old:{base64.b64encode(b'D' * 32).decode()}"


def verify(*args: str) -> str:
    out = StringIO()
    call_command("verify_audit", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refused(*args: str) -> str:
    err = StringIO()
    with pytest.raises(CommandError, match="broken chain"):
        call_command("verify_audit", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


def rewrite_from(account: Account, seq: int, **changes: object) -> None:
    """What a writer of the database alone can do: change the event `seq`, then recompute every
    later digest and the account's head with the formula of services/audit.py."""
    AuditEvent.objects.filter(account=account, seq=seq).update(**changes)
    previous = (
        AuditEvent.objects.get(account=account, seq=seq - 1).digest if seq > 1 else audit.GENESIS
    )
    for event in AuditEvent.objects.filter(account=account, seq__gte=seq).order_by("seq"):
        event.prev_digest = previous
        event.digest = audit.chain_digest(previous, event)
        event.save(update_fields=["prev_digest", "digest"])
        previous = event.digest
    Account.objects.filter(pk=account.pk).update(audit_head=previous)


@pytest.fixture
def history(alice_api, alice):
    """Alice's chain: a refused store (404 on a delete) among successes, with a checkpoint
    signed after the first five events, and two events after it."""
    for index in range(3):
        alice_api.store(f"svc-{index}", creds(api_key="v"))
    assert alice_api.delete("never-stored").status_code == 404
    first = checkpoints.write_checkpoint(account_id=alice.pk)
    for index in range(2):
        alice_api.store(f"later-{index}", creds(api_key="v"))
    return first


def test_an_untouched_history_verifies(history, alice):
    assert history.seq == 5
    out = verify("alice")
    assert "account alice: 7 events, chain intact, 1 signed checkpoint(s) hold" in out
    assert verify("alice", "--expect", f"{history.seq}:{history.digest}")


def test_a_chain_rewritten_with_database_access_alone_fails_naming_the_checkpoint(history, alice):
    refusal = AuditEvent.objects.get(account=alice, status=404)
    assert (refusal.outcome, refusal.seq) == ("refused", 5)
    rewrite_from(alice, refusal.seq, outcome="success", status=200)
    # The hash chain alone is fooled: the rewrite is consistent.
    assert audit.verify_chain(Account.objects.get(pk=alice.pk)) == (7, None)
    message = refused("alice")
    assert (
        f"account alice: contradicts the checkpoint at seq 5 (checkpoint id {history.pk}): "
        "the chain no longer passes through it"
    ) in message


def test_a_checkpoint_altered_to_match_the_rewrite_fails_its_signature(history, alice):
    rewrite_from(alice, 3, outcome="error", status=500)
    new_digest = AuditEvent.objects.get(account=alice, seq=5).digest
    AuditCheckpoint.objects.filter(pk=history.pk).update(digest=new_digest)
    assert "its signature does not verify" in refused("alice")


def test_a_removed_checkpoint_breaks_the_next_ones_link(history, alice, alice_api):
    second = checkpoints.write_checkpoint(account_id=alice.pk)
    assert second.prev_mac == history.mac
    history.delete()
    message = refused("alice")
    assert f"checkpoint at seq {second.seq} (checkpoint id {second.pk})" in message
    assert "link to the previous checkpoint is broken" in message


def test_an_expected_point_kept_outside_catches_a_rewrite_of_the_newest_events(history, alice):
    """The newest events are covered only by the newest checkpoint; a writer who rewrites them
    and deletes that checkpoint leaves a database that verifies, but not against a copy of the
    checkpoint kept elsewhere."""
    last = checkpoints.write_checkpoint(account_id=alice.pk)
    assert last.seq == 7
    rewrite_from(alice, 6, outcome="refused", status=403)
    last.delete()
    assert "1 signed checkpoint(s) hold" in verify("alice")
    message = refused("alice", "--expect", f"{last.seq}:{last.digest}")
    assert "contradicts the checkpoint at seq 7 (--expect)" in message


@pytest.mark.parametrize("given", ["7", "x:y", f"0:{'a' * 64}", f"7:{'A' * 64}"])
def test_expect_takes_seq_and_digest(history, given):
    with pytest.raises(CommandError, match="SEQ:DIGEST"):
        call_command("verify_audit", "alice", "--expect", given, stdout=StringIO())


def test_expect_needs_an_account(history):
    with pytest.raises(CommandError, match="needs the account"):
        call_command("verify_audit", "--expect", f"5:{history.digest}", stdout=StringIO())


def test_a_rotated_audit_key_still_verifies_what_it_signed(alice_api, alice, settings):
    settings.CREDVAULT_AUDIT_KEYS = OLD_AUDIT_KEYS
    alice_api.list()
    old = checkpoints.write_checkpoint(account_id=alice.pk)
    assert old.key_id == "audit-old"
    settings.CREDVAULT_AUDIT_KEYS = f"{TEST_AUDIT_KEYS},{OLD_AUDIT_KEYS}"
    alice_api.list()
    new = checkpoints.write_checkpoint(account_id=alice.pk)
    assert new.key_id == "audit-a"
    assert "2 signed checkpoint(s) hold" in verify("alice")
    settings.CREDVAULT_AUDIT_KEYS = TEST_AUDIT_KEYS  # the old key dropped too early
    assert "key id 'audit-old', which is not in CREDVAULT_AUDIT_KEYS" in refused("alice")


def test_no_checkpoint_when_nothing_was_added(history, alice):
    assert checkpoints.write_checkpoint(account_id=alice.pk).seq == 7
    assert checkpoints.write_checkpoint(account_id=alice.pk) is None
    assert AuditCheckpoint.objects.filter(account=alice).count() == 2


def test_checkpoints_come_while_events_arrive_and_cost_nothing_between(
    alice_api, alice, settings, monkeypatch, django_assert_num_queries
):
    settings.CREDVAULT_AUDIT_CHECKPOINT_SECONDS = 60
    now = [1000.0]
    monkeypatch.setattr(checkpoints.time, "monotonic", lambda: now[0])
    checkpoints._clocks.clear()  # the fixture's token issuance started a clock on the real one
    for advance in (0, 30, 29.9):  # the first event starts the clock; under 60 s, nothing
        now[0] += advance
        with django_assert_num_queries(2 + audit_record_queries()):
            alice_api.list()  # the token, the list, the event
    assert not AuditCheckpoint.objects.exists()
    now[0] = 1060.0  # 60 s since the clock started: this event's request signs
    alice_api.list()
    [checkpoint] = AuditCheckpoint.objects.filter(account=alice)
    assert checkpoint.seq == Account.objects.get(pk=alice.pk).audit_seq
    now[0] += 59
    alice_api.list()
    assert AuditCheckpoint.objects.count() == 1  # the clock restarted at the checkpoint


@pytest.mark.django_db(transaction=True)
def test_every_event_and_checkpoint_is_one_json_line_on_the_audit_logger(alice_api, alice, caplog):
    secret = "sk-marked-never-in-a-line"
    with caplog.at_level(logging.INFO, logger="credvault.audit"):
        alice_api.store("custom", creds(api_key=secret))
        alice_api.list()
        checkpoint = checkpoints.write_checkpoint(account_id=alice.pk)
    lines = [r.getMessage() for r in caplog.records if r.name == "credvault.audit"]
    assert len(lines) == 3
    assert all(secret not in line for line in lines)
    store, listing, signed = (json.loads(line) for line in lines)
    stored = AuditEvent.objects.get(account=alice, action="services.store")
    assert store == {
        "type": "audit_event",
        "event": json.loads(audit.canonical(stored)),
        "prev_digest": stored.prev_digest,
        "digest": stored.digest,
    }
    assert listing["event"]["action"] == "services.list"
    assert signed == {
        "type": "audit_checkpoint",
        "account": alice.pk,
        "account_name": "alice",
        "seq": checkpoint.seq,
        "digest": checkpoint.digest,
        "created_at": signed["created_at"],
        "prev_mac": checkpoints.GENESIS_MAC,
        "key_id": "audit-a",
        "mac": checkpoint.mac,
    }
    # The logged line is what `--expect` takes.
    assert verify("alice", "--expect", f"{signed['seq']}:{signed['digest']}")


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_change_logs_no_event(alice_api, alice, caplog, monkeypatch):
    real, recorded = audit.record, []

    def fault_after_the_first_event(*args, **kwargs):
        recorded.append(real(*args, **kwargs))
        if len(recorded) == 1:  # the store's own event, inside its transaction
            raise RuntimeError("fault after the event")
        return recorded[-1]

    monkeypatch.setattr(audit, "record", fault_after_the_first_event)
    with caplog.at_level(logging.INFO, logger="credvault.audit"):
        assert alice_api.store("custom", creds(api_key="v")).status_code == 500
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "credvault.audit"]
    # Only the refusal's own event: the store's rolled back with the store.
    assert [(line["event"]["action"], line["event"]["status"]) for line in lines] == [
        ("services.store", 500)
    ]
    assert [
        e.status for e in AuditEvent.objects.filter(account=alice, action="services.store")
    ] == [500]


def test_a_failing_checkpoint_leaves_the_request_and_its_event_standing(
    alice_api, alice, settings, monkeypatch, caplog
):
    settings.CREDVAULT_AUDIT_CHECKPOINT_SECONDS = 0
    checkpoints._clocks[alice.pk] = 0.0

    def down(**kwargs):
        raise RuntimeError("checkpoint store down")

    monkeypatch.setattr(checkpoints, "write_checkpoint", down)
    with caplog.at_level(logging.ERROR, logger="credvault.audit"):
        assert alice_api.store("custom", creds(api_key="v")).status_code == 201
    assert AuditEvent.objects.filter(account=alice, action="services.store", status=201).exists()
    assert any("checkpoint of account" in r.getMessage() for r in caplog.records)
