"""Standard Webhooks v1: the secret's format, the body and the signature headers.

A secret is `whsec_` and the standard base64 of 32 random bytes; the HMAC key is those bytes.
A request carries `webhook-id` (the event's id, the same on every attempt),
`webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`: `v1,` and the
base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}`, one per secret in use, space-separated
(two for 24 hours after a rotation). The body is `{"type", "timestamp", "data"}` in compact
JSON, `timestamp` being the event's time (RFC 3339), as is `data.occurredAt`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime

from services.masking import Secret
from services.times import rfc3339

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SECRET_BYTES = 32


def new_secret() -> str:
    """A new signing secret: `whsec_` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def body_of(
    *, type: str, occurred_at: datetime, sequence: int, data: Mapping[str, object]
) -> bytes:
    """The request body of an event, the same on every attempt: its `data` with the
    account's `sequence` and `occurredAt`."""
    moment = rfc3339(occurred_at)
    full = {**data, "sequence": sequence, "occurredAt": moment}
    document = {"type": type, "timestamp": moment, "data": full}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: Secret, *, event_id: str, timestamp: int, body: bytes) -> str:
    """`v1,` and the base64 HMAC-SHA256 of `{event_id}.{timestamp}.{body}` under the secret."""
    key = base64.b64decode(secret.reveal().removeprefix(SECRET_PREFIX))
    signed = f"{event_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(
    signing: Iterable[Secret], *, event_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt, signed by every secret in `signing`."""
    signatures = " ".join(
        signature(secret, event_id=event_id, timestamp=timestamp, body=body) for secret in signing
    )
    return {
        "Content-Type": "application/json",
        "User-Agent": "credvault-webhooks",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signatures,
    }
