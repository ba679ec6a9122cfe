"""A rate limit as the settings write it: `N/unit`, unit one of s, sec, second, m, min, minute,
h, hour, d, day (`600/min`). The API's throttles count against it (services/api/throttling.py);
the system check credvault.E004 refuses a malformed one at start-up."""

from __future__ import annotations

import re
from functools import lru_cache

_RATE = re.compile(r"\s*(\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class RateError(ValueError):
    pass


@lru_cache(maxsize=16)
def parse_rate(rate: str) -> tuple[int, int]:
    """`600/min` -> (600, 60): the count allowed, and the window in seconds."""
    match = _RATE.fullmatch(rate or "")
    if not match or int(match.group(1)) < 1:
        raise RateError(f"{rate!r} is not a rate such as 600/min")
    return int(match.group(1)), _UNIT_SECONDS[match.group(2)[0]]
