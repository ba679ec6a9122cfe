"""schemathesis hooks of `scripts.fuzz_api`: the marked-secret check.

No response may hold a seeded token, nor a stored value, except the agent read of a granted
service, which returns that service's own values and no other's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import schemathesis

_SEEDED = json.loads(Path(os.environ["CREDVAULT_FUZZ_SECRETS"]).read_text())
_VALUES: dict[str, list[str]] = _SEEDED["values"]
_TOKENS: list[str] = _SEEDED["tokens"]
AGENT_READ = "/api/v1/agent/credentials/"


@schemathesis.check
def no_marked_secret(ctx, response, case) -> None:
    """No seeded token anywhere; a stored value only in its own service's agent read."""
    text = response.content.decode("utf-8", "replace")
    text += "\n".join(f"{name}: {value}" for name, value in response.headers.items())
    allowed: set[str] = set()
    if case.path.startswith(AGENT_READ) and response.status_code == 200:
        allowed = set(_VALUES.get(json.loads(response.content)["service"], []))
    leaked = [t for t in _TOKENS if t in text]
    leaked += [v for vs in _VALUES.values() for v in vs if v in text and v not in allowed]
    if leaked:
        raise AssertionError(f"{len(leaked)} marked secret(s) in the response")
