"""Redaction: every value credvault injected, in each form it was sent, is replaced by
`[REDACTED]` in the answer's headers and body before it leaves."""

from __future__ import annotations

REDACTED = b"[REDACTED]"


def redact(data: bytes, sent: tuple[str, ...]) -> bytes:
    """Every occurrence of an injected value, in each form it was sent, as [REDACTED]."""
    for form in sent:  # longest first, so that no shorter form cuts a longer one
        data = data.replace(form.encode(), REDACTED)
    return data
