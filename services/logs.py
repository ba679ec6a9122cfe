"""Logging without data: tracebacks keep their frames but lose the exception's message.

An exception's text can carry what the code was handling (a URL with a key in it, a header, a
value in a KeyError), so log records print the exception class and the stack, never its text.
"""

from __future__ import annotations

import logging
import traceback
from types import TracebackType


class RedactingFormatter(logging.Formatter):
    def formatException(
        self,
        ei: tuple[type[BaseException], BaseException, TracebackType | None]
        | tuple[None, None, None],
    ) -> str:
        exc_type, _, tb = ei
        if exc_type is None:
            return ""
        frames = "".join(traceback.format_tb(tb)) if tb else ""
        return (
            f"Traceback (most recent call last):\n{frames}"
            f"{exc_type.__module__}.{exc_type.__qualname__}: (message withheld)"
        )
