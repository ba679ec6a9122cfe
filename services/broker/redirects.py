"""Redirects that leave the service: followed by credvault itself, or refused, never passed to
the agent, whose SDK would follow them with the agent token.

A redirect that stays under the service's API base (judged by `locations.judged`) is passed
back, moved onto the proxy. One that leaves is followed when it is a 301, 302 or 303 answer to
a GET or HEAD: the same method, with no credential, none of the agent's headers and no body,
under the outbound address rules (`named_destination`), at most MOST_HOPS times,
within what is left of CREDVAULT_PROXY_MAX_DURATION. Any other is 502
`upstream_foreign_redirect`, with no `Location` (docs/agents.md#brokered-access).
"""

from __future__ import annotations

import re
import time
from collections.abc import Hashable
from contextlib import suppress
from dataclasses import dataclass

from django.conf import settings

from providers.http.client import OpenAnswer, open_answer
from providers.http.destinations import Destination, named_destination
from providers.http.failures import Failure, OutboundError
from services.broker.answers import failure
from services.broker.locations import judged
from services.exceptions import UpstreamForeignRedirect

FOLLOWED_STATUSES = frozenset({301, 302, 303})
FOLLOWED_METHODS = frozenset({"GET", "HEAD"})
MOST_HOPS = 3
# A redirect's own body is read to its end when it is this short (so that its connection can
# carry the next call), else its connection is closed.
READ_REDIRECT_BODY_MOST = 64 * 1024
# A request target credvault sends: printable ASCII, no space.
_TARGET = re.compile(r"/[!-~]*")


@dataclass(frozen=True, slots=True)
class Landed:
    """The answer the agent gets, and the URL of the request that it answers."""

    answer: OpenAnswer
    request_url: str


def is_redirect(answer: OpenAnswer) -> bool:
    return 300 <= answer.status < 400 and answer.status != 304 and _location(answer) is not None


def followed(
    answer: OpenAnswer,
    *,
    method: str,
    request_url: str,
    api_base: str,
    pool_key: Hashable,
    started: float,
) -> Landed:
    """Where `answer` (to `method` at `request_url`) leads: itself, unless it is a redirect that
    leaves the service, which is followed or refused (UpstreamForeignRedirect). `started`: when
    the call began (time.monotonic()). Raises the call's failures; every answer left behind is
    closed."""
    hops = 0
    while is_redirect(answer):
        address = judged(_location(answer) or "", api_base=api_base, request_url=request_url)
        if address.stays:
            break
        destination = _destination(address.url)
        if (
            method not in FOLLOWED_METHODS
            or answer.status not in FOLLOWED_STATUSES
            or hops == MOST_HOPS
            or destination is None
        ):
            answer.close()
            raise UpstreamForeignRedirect()
        _done_with(answer)
        request_url = address.url.partition("#")[0]
        answer = _hop(destination, method, request_url, pool_key, started)
        hops += 1
    return Landed(answer, request_url)


def _location(answer: OpenAnswer) -> str | None:
    return next(
        (value.strip() for name, value in answer.headers if name.lower() == "location"), None
    )


def _destination(url: str) -> Destination | None:
    """Where a followed hop may go, or None: an http(s) URL without user info whose host the
    outbound rules allow, with a request target that can be sent as it is."""
    if not url:
        return None
    authority = url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in authority:
        return None
    destination = named_destination(url)
    if destination is None or not _TARGET.fullmatch(_target(url)):
        return None
    return destination


def _target(url: str) -> str:
    """The request target of an absolute URL: its path (`/` when empty) and query."""
    after_authority = url.split("://", 1)[-1]
    slash = min(
        (i for i in (after_authority.find(c) for c in "/?#") if i >= 0),
        default=len(after_authority),
    )
    target = after_authority[slash:].partition("#")[0]
    return target if target.startswith("/") else "/" + target


def _done_with(answer: OpenAnswer) -> None:
    """A redirect's body read to its end when short (its connection kept), else closed."""
    length = answer.declared_length
    if length is not None and length <= READ_REDIRECT_BODY_MOST:
        with suppress(OutboundError):  # a failed read closes the answer itself
            answer.read_all()
    else:
        answer.close()


def _hop(
    destination: Destination,
    method: str,
    url: str,
    pool_key: Hashable,
    started: float,
) -> OpenAnswer:
    """One followed request: `method` at `url`, nothing of the agent's or the credential."""
    left = settings.CREDVAULT_PROXY_MAX_DURATION - (time.monotonic() - started)
    if left <= 0:
        raise failure(Failure.TIMEOUT)
    try:
        answer = open_answer(
            destination=destination,
            method=method,
            target=_target(url),
            headers={},
            body=None,
            timeout=min(settings.CREDVAULT_PROXY_TIMEOUT, left),
            max_duration=left,
            max_answer=settings.CREDVAULT_PROXY_MAX_RESPONSE,
            pool_key=pool_key,
        )
    except OutboundError as exc:
        if exc.kind is Failure.ADDRESS_REFUSED:
            raise UpstreamForeignRedirect() from None
        raise failure(exc.kind) from None
    return answer
