"""The provider's answer as the agent receives it, and the call's failures as refusals."""

from __future__ import annotations

from dataclasses import dataclass

from providers import outbound
from services.broker.headers import header_tokens
from services.broker.redaction import Redaction
from services.exceptions import (
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
# The codings the outbound client decodes; an answer in another one cannot be redacted.
DECODED_CODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})


@dataclass(frozen=True, slots=True)
class ProxyAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def agents_answer(answer: outbound.Answer, sent: tuple[str, ...]) -> ProxyAnswer:
    """The provider's status, its end-to-end headers less Set-Cookie, and its body, each with
    every injected value redacted; an answer in a coding credvault cannot read is refused."""
    if not header_tokens(answer.headers, "content-encoding") <= DECODED_CODINGS:
        raise UpstreamUnavailable("The provider answered in an encoding credvault cannot read.")
    connection_named = header_tokens(answer.headers, "connection")
    redaction = Redaction(sent)
    headers = [
        (name, redaction.apply(value.encode("latin-1")).decode("latin-1"))
        for name, value in answer.headers
        if name.lower() not in DROPPED_ANSWER_HEADERS and name.lower() not in connection_named
    ]
    return ProxyAnswer(answer.status, headers, redaction.apply(answer.body))


def failure(kind: outbound.Failure) -> Exception:
    """The refusal the agent gets for a call that failed on its way to the provider."""
    if kind is outbound.Failure.TIMEOUT:
        return UpstreamTimeout()
    if kind is outbound.Failure.TOO_LARGE:
        return UpstreamTooLarge()
    if kind is outbound.Failure.ADDRESS_REFUSED:
        return UpstreamUnavailable("The provider's address is not a public one.")
    if kind is outbound.Failure.BAD_ANSWER:
        return UpstreamBadAnswer()
    return UpstreamUnavailable()
