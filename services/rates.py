"""A rate limit as the settings write it: `N/unit`, unit one of s, sec, second, m, min, minute,
h, hour, d, day (`600/min`). Standard library only: the settings' declaration
(credvault/configuration.py) parses the rate settings with it as they load, so a malformed one
stops start-up in one line (credvault.E004); the API's throttles count against the typed value
(services/api/throttling.py)."""

from __future__ import annotations

import re
from typing import NamedTuple

_RATE = re.compile(r"\s*(\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class RateError(ValueError):
    pass


class Rate(NamedTuple):
    """`requests` allowed in each window of `seconds`."""

    requests: int
    seconds: int


def parse_rate(rate: str) -> Rate:
    """`600/min` -> Rate(requests=600, seconds=60)."""
    match = _RATE.fullmatch(rate or "")
    if not match or int(match.group(1)) < 1:
        raise RateError(f"{rate!r} is not a rate such as 600/min")
    return Rate(int(match.group(1)), _UNIT_SECONDS[match.group(2)[0]])
