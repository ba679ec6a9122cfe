"""The verification engine: one catalog check, one HTTP request, one verdict.

The request goes through the strict outbound client (providers/http/): no
redirect followed, TLS verified, nothing from the environment, the whole call bounded by
CREDVAULT_VERIFY_TIMEOUT, at most 1 MiB of the answer read (a JSON condition reads at most 64
KiB of it), no retry. Every failure becomes a reason without passing an exception's text
(which can hold a URL or a header) to a log or a caller. Where the request goes is
`providers.bases.destination_for`'s answer, the same as a brokered call's.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote

from django.conf import settings

from providers import catalog, placement
from providers.bases import base_url_for, destination_for
from providers.catalog import Check
from providers.http.client import Answer, send
from providers.http.failures import OutboundError

logger = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 1024 * 1024
MAX_JSON_BYTES = 64 * 1024
USER_AGENT = "credvault-verifier/1"


class Reason(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    NO_VERIFIER = "no_verifier"


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason

    @property
    def ok(self) -> bool:
        return self.reason in (Reason.ACCEPTED, Reason.NO_VERIFIER)

    @property
    def verified(self) -> bool:
        return self.reason is Reason.ACCEPTED


Revealable = placement.Revealable


def can_verify(provider: catalog.Provider, shape: catalog.Shape) -> bool:
    """Whether a set of this shape gets a real check here (else `no_verifier`): one with a
    base URL, the catalog's, the operator's, or the connection's own host where the shape
    takes that field (a set without it is checked only with one of the others)."""
    if shape.check is None:
        return False
    own_host = provider.api_host is not None and provider.api_host.field in shape.known
    return base_url_for(provider) is not None or own_host


# --- building the request -------------------------------------------------------------------


def _headers(check: Check, placed: placement.Placement) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    headers.update(check.headers)
    if check.body is not None:
        headers["Content-Type"] = check.content_type
    headers.update(placed.headers)
    return headers


def _path(check: Check, placed: placement.Placement, fields: Mapping[str, Revealable]) -> str:
    """The check's path: its `path_fields` (identifiers such as Twilio's Account SID) filled
    in, each percent-encoded as one segment; a flagged check carries its credential in it
    (Telegram's bot token), percent-encoded and never logged."""
    path = check.path
    for name in check.path_fields:
        path = path.replace("{" + name + "}", quote(fields[name].reveal(), safe=""))
    if not check.credential_in_url:
        return path
    return placed.path_prefix + path.partition("{" + check.auth.field + "}")[2]


def _judge(check: Check, answer: Answer) -> Reason:
    status = answer.status
    if status in (401, 403):
        return Reason.REJECTED
    if not 200 <= status < 300:
        # Redirects (never followed), 429, 5xx and anything unexpected.
        return Reason.PROVIDER_UNAVAILABLE
    if check.accept_json is None:
        return Reason.ACCEPTED
    if len(answer.body) > MAX_JSON_BYTES:
        return Reason.PROVIDER_UNAVAILABLE
    try:
        document = json.loads(answer.body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return Reason.PROVIDER_UNAVAILABLE
    return Reason.ACCEPTED if check.accept_json.holds(document) else Reason.REJECTED


def run_check(
    provider: catalog.Provider, check: Check, fields: Mapping[str, Revealable], timeout: float
) -> Reason:
    """Send the check's one request and judge the answer within `timeout` seconds.

    The outbound client bounds the whole exchange by the deadline, a name lookup included
    (which no socket timeout interrupts): at the deadline its watchdog shuts the exchange's
    socket down and the check answers `provider_unavailable`. Never raises for network
    trouble.
    """
    destination = destination_for(provider, fields)
    if destination is None:
        return Reason.NO_VERIFIER
    try:
        placed = placement.place(check.auth, check.path, fields)
    except placement.Unsendable:
        # No provider accepts a credential that cannot be sent; nothing is sent.
        logger.info("verification of %s: value not sendable in a header", provider.id)
        return Reason.REJECTED
    started = time.monotonic()
    try:
        answer = send(
            destination=destination,
            method=check.method,
            target=destination.base_path + _path(check, placed, fields),
            headers=_headers(check, placed),
            body=check.body.encode() if check.body is not None else None,
            timeout=timeout,
            max_answer=MAX_ANSWER_BYTES,
        )
    except OutboundError as exc:
        reason, status = Reason.PROVIDER_UNAVAILABLE, exc.kind.value
    else:
        reason, status = _judge(check, answer), str(answer.status)
    logger.info(
        "verification of %s: %s (%s) in %.0f ms",
        provider.id,
        reason.value,
        status,
        (time.monotonic() - started) * 1000,
    )
    return reason


def verify(provider_id: str, fields: Mapping[str, Revealable]) -> Verdict:
    """Verify a credential set whose keyNames match one of the provider's shapes.

    A service outside the catalog, or a shape without a check, is `no_verifier`: no request.
    """
    provider = catalog.get(provider_id)
    if provider is None:
        return Verdict(Reason.NO_VERIFIER)
    shape = provider.match(fields).shape
    if shape is None or shape.check is None or destination_for(provider, fields) is None:
        return Verdict(Reason.NO_VERIFIER)
    timeout = settings.CREDVAULT_VERIFY_TIMEOUT
    return Verdict(run_check(provider, shape.check, fields, timeout))
