"""The provider's answer as the agent receives it, and the call's failures as refusals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from providers.http.client import OpenAnswer
from providers.http.failures import Failure
from services.broker.headers import canonical, header_tokens
from services.broker.redaction import Redaction
from services.broker.streams import PassedOn
from services.exceptions import (
    ProblemError,
    UpstreamBadAnswer,
    UpstreamTimeout,
    UpstreamTooLarge,
    UpstreamUnavailable,
)

# Headers of the provider's answer that never reach the agent.
DROPPED_ANSWER_HEADERS = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        # The body is passed on decoded and re-framed by credvault.
        "content-length",
        "content-encoding",
    }
)
# Prefixes of the provider's headers that never reach the agent: credvault's own
# (`X-Credvault-Error` tells credvault's refusal from the provider's answer, so a provider never
# writes it) and those a proxy in front of credvault obeys (nginx's `X-Accel-Redirect` would
# serve another of its locations in the provider's place).
DROPPED_ANSWER_PREFIXES = ("x-credvault-", "x-accel-")
# The codings the outbound client decodes; an answer in another one cannot be redacted.
DECODED_CODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})


# An answer whose body is known to be at most this long (its Content-Length says so) is read
# whole and passed on with its length; any other answer is passed on as it arrives.
WHOLE_ANSWER_MOST = 64 * 1024


@dataclass(frozen=True, slots=True)
class ProxyAnswer:
    """The answer the agent receives: the provider's status and headers, and its body, whole
    (`body`) or as it arrives (`stream`)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    stream: PassedOn | None = None


def readable(answer: OpenAnswer) -> None:
    """Refuse an answer in a coding credvault cannot read (nor so redact), its connection
    closed."""
    if not header_tokens(answer.headers, "content-encoding") <= DECODED_CODINGS:
        answer.close()
        raise UpstreamUnavailable("The provider answered in an encoding credvault cannot read.")


def passed_whole(answer: OpenAnswer, *, method: str) -> bool:
    """Whether the answer's body is read whole before it is passed on: none may follow its
    head (HEAD, 204, 304), or its Content-Length is at most WHOLE_ANSWER_MOST."""
    if method == "HEAD" or answer.status in (204, 304):
        return True
    length = answer.declared_length
    return length is not None and length <= WHOLE_ANSWER_MOST


def addresses_in_body(answer: OpenAnswer, *, answer_urls: str, method: str) -> bool:
    """Whether the answer's body is JSON whose absolute URLs are moved onto the proxy: the
    catalog says the provider's answers carry them (`answer_urls = "json"`) and the answer's
    Content-Type is JSON (`application/json`, or a `+json` type). Such a body is read whole
    (at most CREDVAULT_PROXY_MAX_RESPONSE) before it is passed on, whatever its length, and its
    length is the rewritten body's."""
    if answer_urls != "json" or method == "HEAD":
        return False
    content_type = next(
        (value for name, value in answer.headers if name.lower() == "content-type"), ""
    )
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def agents_headers(
    answer: OpenAnswer, redaction: Redaction, *, method: str
) -> list[tuple[str, str]]:
    """The provider's end-to-end headers less Set-Cookie, credvault's own and a proxy's (by
    their canonical names: `X_Accel_Redirect` too), each with every injected value redacted.
    The body is passed on decoded and framed again, so its length and coding go, but for a
    HEAD answer, which keeps the Content-Length of the GET it stands for."""
    connection_named = header_tokens(answer.headers, "connection")
    dropped = (
        DROPPED_ANSWER_HEADERS - {"content-length"} if method == "HEAD" else DROPPED_ANSWER_HEADERS
    )
    return [
        (name, redaction.apply(value.encode("latin-1")).decode("latin-1"))
        for name, value in answer.headers
        if name.lower() not in dropped
        and name.lower() not in connection_named
        and not canonical(name).startswith(DROPPED_ANSWER_PREFIXES)
    ]


# The refusal of each way a call fails on its way to the provider: its problem class (its
# status and code) and its detail (None: the class's own). One line a kind.
FAILURE_PROBLEMS: Mapping[Failure, tuple[type[ProblemError], str | None]] = {
    Failure.TIMEOUT: (UpstreamTimeout, None),
    Failure.TOO_LARGE: (UpstreamTooLarge, None),
    Failure.UNAVAILABLE: (UpstreamUnavailable, None),
    Failure.ADDRESS_REFUSED: (UpstreamUnavailable, "The provider's address is not a public one."),
    Failure.BAD_ANSWER: (UpstreamBadAnswer, None),
}


def failure(kind: Failure) -> ProblemError:
    """The refusal the agent gets for a call that failed on its way to the provider."""
    problem, detail = FAILURE_PROBLEMS[kind]
    return problem(detail)
