"""Logging without data: tracebacks keep their frames but lose the exception's message.

An exception's text can carry what the code was handling (a URL with a key in it, a header, a
value in a KeyError), so log records print the exception class and the stack, never its text;
except for credvault's own exceptions whose class declares `message_is_safe_to_log` because
it writes every message itself from names and ids (a DecryptionError names its row).

No line holds a whole account or agent token either (`bearer_tokens.withheld`): a path can
carry one (Telegram's `/bot<agent token>/getMe` on the proxy), and Django's own response
warnings print the path.
"""

from __future__ import annotations

import logging
import traceback
from types import TracebackType
from urllib.parse import quote

from services.bearer_tokens import withheld

_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def escaped_path(path: str) -> str:
    """A path as a log line writes it: percent-encoded, so that no control character or
    newline reaches the log, and any token in it withheld."""
    return withheld(quote(path, safe=_PATH_SAFE))


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return withheld(super().format(record))

    def formatException(
        self,
        ei: tuple[type[BaseException], BaseException, TracebackType | None]
        | tuple[None, None, None],
    ) -> str:
        exc_type, exc, tb = ei
        if exc_type is None:
            return ""
        frames = "".join(traceback.format_tb(tb)) if tb else ""
        safe = getattr(exc_type, "message_is_safe_to_log", False) is True
        message = str(exc) if safe else "(message withheld)"
        return (
            f"Traceback (most recent call last):\n{frames}"
            f"{exc_type.__module__}.{exc_type.__qualname__}: {message}"
        )


class WithoutTraceback(logging.Filter):
    """Keeps a record to its one line: for refusals of a client's request that say all there is
    to say in their message (Django's `django.security.DisallowedHost`, a bad `Host` header
    from a scanner or a misrouted client), where the stack is Django's own and the same
    every time."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True
