"""Signed audit checkpoints: what a writer of the database alone cannot forge (it can rewrite
the hash chain of `services/audit.py` consistently). A checkpoint signs one account's chain
seq and digest under a key of CREDVAULT_AUDIT_KEYS, outside the database (the first key signs,
every key verifies):

    mac = HMAC-SHA256(key, "credvault-audit-checkpoint-v1\\n{account id}\\n{seq}\\n{digest}
                           \\n{created_at, RFC 3339}\\n{prev_mac}")

`prev_mac` chains the checkpoints ("0" * 64 for the first). Each checkpoint and each event
(`event_line`) is also one JSON line of the `credvault.audit` logger, a copy outside the
database. `note_event`, after every event, writes one when an account's first event seen by
this worker is CREDVAULT_AUDIT_CHECKPOINT_SECONDS old (between them an event costs a dict
lookup and a clock read); `manage.py checkpoint_audit` writes one for every account. The window
this leaves is in docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from services.crypto import parse_key_entries
from services.models import Account, AuditCheckpoint, AuditEvent
from services.storage.transactions import account_transaction
from services.times import rfc3339

audit_log = logging.getLogger("credvault.audit")

GENESIS_MAC = "0" * 64
_FORMAT = "credvault-audit-checkpoint-v1"
# account id -> when this worker last started the account's checkpoint clock (monotonic).
_clocks: dict[int, float] = {}


@dataclass(frozen=True)
class AuditKeys:
    """The HMAC keys of CREDVAULT_AUDIT_KEYS: the first signs, every one verifies."""

    signing_id: str
    keys: dict[str, bytes]

    def __repr__(self) -> str:
        return f"AuditKeys(ids={list(self.keys)!r})"

    def mac(self, key_id: str, message: bytes) -> str:
        return hmac.new(self.keys[key_id], message, hashlib.sha256).hexdigest()


@lru_cache(maxsize=4)
def _parsed(raw: str) -> AuditKeys:
    entries = parse_key_entries(raw, setting="CREDVAULT_AUDIT_KEYS")
    return AuditKeys(signing_id=entries[0][0], keys=dict(entries))


def audit_keys() -> AuditKeys:
    """The audit keys of the current settings; KeyRingError when missing or malformed."""
    return _parsed(settings.CREDVAULT_AUDIT_KEYS)


def signed_text(checkpoint: AuditCheckpoint) -> bytes:
    return "\n".join(
        [
            _FORMAT,
            str(checkpoint.account_id),
            str(checkpoint.seq),
            checkpoint.digest,
            rfc3339(checkpoint.created_at),
            checkpoint.prev_mac,
        ]
    ).encode("ascii")


def checkpoint_line(checkpoint: AuditCheckpoint, account_name: str) -> str:
    """The checkpoint as one JSON line, for the `credvault.audit` logger."""
    return json.dumps(
        {
            "type": "audit_checkpoint",
            "account": checkpoint.account_id,
            "account_name": account_name,
            "seq": checkpoint.seq,
            "digest": checkpoint.digest,
            "created_at": rfc3339(checkpoint.created_at),
            "prev_mac": checkpoint.prev_mac,
            "key_id": checkpoint.key_id,
            "mac": checkpoint.mac,
        },
        separators=(",", ":"),
    )


def write_checkpoint(*, account_id: int) -> AuditCheckpoint | None:
    """Sign the account's chain where it stands now, unless nothing was added since its last
    checkpoint (then None). Under the account's head lock, so that no event slips between the
    head read and the signature, and two workers never sign from the same previous checkpoint.
    Inside a change's transaction it commits, and is logged, with that change."""
    keys = audit_keys()
    with account_transaction(account_id):
        name, seq, digest = Account.objects.values_list("name", "audit_seq", "audit_head").get(
            pk=account_id
        )
        last = (
            AuditCheckpoint.objects.filter(account_id=account_id)
            .order_by("-seq")
            .values_list("seq", "mac")
            .first()
        )
        if seq == 0 or (last is not None and last[0] >= seq):
            return None
        checkpoint = AuditCheckpoint(
            account_id=account_id,
            seq=seq,
            digest=digest,
            created_at=timezone.now(),
            prev_mac=last[1] if last else GENESIS_MAC,
            key_id=keys.signing_id,
        )
        checkpoint.mac = keys.mac(keys.signing_id, signed_text(checkpoint))
        checkpoint.save(force_insert=True)
        transaction.on_commit(lambda: audit_log.info(checkpoint_line(checkpoint, name)))
    return checkpoint


def note_event(account_id: int) -> None:
    """After each event of the account: a checkpoint when its clock in this worker has run
    CREDVAULT_AUDIT_CHECKPOINT_SECONDS (see the module)."""
    now = time.monotonic()
    started = _clocks.setdefault(account_id, now)
    if now - started >= settings.CREDVAULT_AUDIT_CHECKPOINT_SECONDS:
        _clocks[account_id] = now
        try:
            write_checkpoint(account_id=account_id)
        except Exception as exc:
            # The request and its event stand; the next checkpoint covers this one's events.
            # Inside a change's transaction, only the checkpoint's savepoint is rolled back.
            audit_log.error(
                "audit checkpoint of account %s failed: %s", account_id, type(exc).__name__
            )


@dataclass(frozen=True)
class Contradiction:
    """The first checkpoint the database contradicts, and how."""

    account: str
    seq: int
    checkpoint_id: int | None
    reason: str

    def __str__(self) -> str:
        where = f"checkpoint id {self.checkpoint_id}" if self.checkpoint_id else "--expect"
        return (
            f"account {self.account}: contradicts the checkpoint at seq {self.seq} ({where}): "
            f"{self.reason}"
        )


def verify_checkpoints(account: Account) -> tuple[int, Contradiction | None]:
    """Check every checkpoint of the account, oldest first: its link to the previous one, its
    signature, and that the chain passes through it (the event at its seq has its digest).
    Run after `audit.verify_chain`, which checks the chain itself. (checkpoints checked, the
    first contradiction or None)."""
    keys = audit_keys()
    checkpoints = AuditCheckpoint.objects.filter(account=account).order_by("seq")
    digests = dict(
        AuditEvent.objects.filter(account=account, seq__in=checkpoints.values("seq")).values_list(
            "seq", "digest"
        )
    )
    previous, count = GENESIS_MAC, 0
    for checkpoint in checkpoints:
        count += 1
        reason = _contradiction(checkpoint, previous, digests.get(checkpoint.seq), keys)
        if reason:
            return count, Contradiction(account.name, checkpoint.seq, checkpoint.pk, reason)
        previous = checkpoint.mac
    return count, None


def _contradiction(
    checkpoint: AuditCheckpoint, previous_mac: str, stored_digest: str | None, keys: AuditKeys
) -> str:
    """How `checkpoint` is contradicted ("" when it holds), given the previous checkpoint's
    MAC and the digest the database holds for the event at its seq."""
    if not hmac.compare_digest(checkpoint.prev_mac, previous_mac):
        return "its link to the previous checkpoint is broken: one was removed"
    if checkpoint.key_id not in keys.keys:
        return f"signed with key id {checkpoint.key_id!r}, which is not in CREDVAULT_AUDIT_KEYS"
    if not hmac.compare_digest(
        checkpoint.mac, keys.mac(checkpoint.key_id, signed_text(checkpoint))
    ):
        return "its signature does not verify: the checkpoint was altered"
    if stored_digest is None or not hmac.compare_digest(stored_digest, checkpoint.digest):
        return "the chain no longer passes through it: events up to it were rewritten"
    return ""


def check_expected(account: Account, seq: int, digest: str) -> Contradiction | None:
    """A checkpoint kept outside the database (`verify_audit --expect SEQ:DIGEST`): the event
    at `seq` must still have `digest`."""
    stored = (
        AuditEvent.objects.filter(account=account, seq=seq).values_list("digest", flat=True).first()
    )
    if stored is not None and hmac.compare_digest(stored, digest):
        return None
    reason = "no event has that seq" if stored is None else "the event there has another digest"
    return Contradiction(account.name, seq, None, f"{reason}: the chain was rewritten")
