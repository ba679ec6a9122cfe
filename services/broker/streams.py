"""A provider's answer passed on as it arrives: each piece of its body leaves as soon as the
redaction allows, so a Server-Sent Events stream keeps its timing, and a worker holds one piece
of it at a time, never the whole answer.

The call's audit event says how the body ended: `success` (passed on whole), `cut` (credvault
ended it: its size, its duration, a silence, the provider's connection failing; the agent's
connection then ends without the body's end, `StreamCut`, so no agent takes a cut body for a
whole one) or `abandoned` (the agent went away first). Either way the provider's connection is
closed or given back at once.

Between pieces a gevent worker lets its other greenlets run (`_pause`): a stream whose pieces
arrive as fast as they are passed on never waits on a socket, and would otherwise keep the
worker from its other calls and from telling gunicorn's arbiter that it lives.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator

import gevent
from gevent import monkey

from providers.http.client import OpenAnswer
from providers.http.failures import OutboundError
from services.broker.redaction import Redaction, StreamRedaction
from services.models import AuditOutcome


def _pause() -> None:
    """Let the worker's other greenlets run, when it is a gevent worker's (gunicorn's gevent
    worker patches the socket module before it loads credvault); nothing otherwise."""
    if monkey.is_module_patched("socket"):
        gevent.sleep(0)


class StreamCut(ConnectionResetError):
    """Raised into the WSGI server where credvault cuts a body: the server ends the agent's
    connection without the body's end (gunicorn, as quietly as a connection the client reset;
    the last chunk of a chunked body is never written)."""

    def __init__(self) -> None:
        super().__init__(errno.ECONNRESET, "the brokered call's answer was cut")


class PassedOn:
    """The body of a streamed answer as the agent receives it. Iterated once; closed by the
    WSGI server once the body has ended or the agent has gone (`close`). `finished` is called
    once, with the body's outcome, before the agent sees the end of a whole body."""

    __slots__ = ("_answer", "_finished", "_on_finish", "_redaction")

    def __init__(
        self,
        *,
        answer: OpenAnswer,
        redaction: Redaction,
        finished: Callable[[AuditOutcome], None],
    ) -> None:
        self._answer = answer
        self._redaction = redaction
        self._on_finish = finished
        self._finished = False

    def __repr__(self) -> str:
        return f"PassedOn({self._answer!r})"

    def __iter__(self) -> Iterator[bytes]:
        stream = StreamRedaction(self._redaction)
        try:
            while piece := self._answer.read():
                if passed := stream.feed(piece):
                    yield passed
                _pause()
        except OutboundError:
            self._finish(AuditOutcome.CUT)
            raise StreamCut() from None
        if rest := stream.end():
            yield rest
        self._finish(AuditOutcome.SUCCESS)

    def close(self) -> None:
        """The WSGI server is done with the body: ended, or the agent went away first."""
        self._finish(AuditOutcome.ABANDONED)

    def cut(self) -> None:
        """credvault stops reading before the body's end (the MCP server's result limit): the
        provider's connection is closed and the event says `cut`."""
        self._finish(AuditOutcome.CUT)

    def _finish(self, outcome: AuditOutcome) -> None:
        if self._finished:
            return
        self._finished = True
        self._answer.close()
        self._on_finish(outcome)
