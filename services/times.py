"""The one text form of a moment in credvault: RFC 3339 in UTC, with microseconds and `Z`.

API bodies and the audit chain's canonical form both use it, so it must never change: an
event's digest covers this text (`tests/test_properties.py` holds it to the `strftime` form
the chain was built on). It is formatted from the fields with `%`, about twice as fast as
`isoformat` and several times faster than `strftime`: a list of 100 services formats 100.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """`2026-11-21T07:10:02.123456Z` for any aware datetime."""
    if moment.utcoffset():
        moment = moment.astimezone(UTC)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031 (measured faster)
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.second,
        moment.microsecond,
    )
