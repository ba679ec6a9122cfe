"""The one text form of a moment in credvault: RFC 3339 in UTC, with microseconds and `Z`.

API bodies and the audit chain's canonical form both use it, so it must never change: an
event's digest covers this text. `isoformat` is used because it is several times cheaper than
`strftime`, and a list of 100 services formats 100 of them.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """`2026-11-21T07:10:02.123456Z` for any aware datetime."""
    if moment.utcoffset():
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
