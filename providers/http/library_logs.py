"""Silent libraries: urllib3's log records keep their words but lose their arguments and their
exception, since a URL (Telegram's token is in its path), a header or a malformed answer's lines
can each hold a credential. Installed when this module is imported (by `providers.http.client`)."""

from __future__ import annotations

import logging
import re

# A %-style conversion of a log format (`%s`, `%d`, `%(name)r`, ...), or `%%`.
_CONVERSION = re.compile(r"%(\([^)]*\))?[#0 +\-]*(\*|\d+)?(\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")


class WithheldArguments(logging.Filter):
    """A record of urllib3 keeps its own words (its format) and level, but every argument of
    the format reads `[withheld]` and its exception is dropped: urllib3 puts the request's URL
    (Telegram's token is in its path), a certificate, or a malformed answer's lines and the
    exception that names them there. Installed on each of urllib3's loggers, since a logger's
    filter sees only its own records."""

    def filter(self, record: logging.LogRecord) -> bool:
        words = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        record.msg = _CONVERSION.sub(
            lambda match: "%" if match.group(5) == "%" else "[withheld]", words
        )
        record.args = ()
        record.exc_info = record.exc_text = record.stack_info = None
        return True


URLLIB3_LOGGERS = (
    "urllib3",
    "urllib3.connection",
    "urllib3.connectionpool",
    "urllib3.contrib.emscripten.response",
    "urllib3.contrib.pyopenssl",
    "urllib3.contrib.socks",
    "urllib3.http2.connection",
    "urllib3.poolmanager",
    "urllib3.response",
    "urllib3.util.retry",
)


def withhold_library_arguments() -> None:
    """Put WithheldArguments on every logger of urllib3 (once each), those that exist now and
    those its modules create when they are imported."""
    existing = [name for name in logging.root.manager.loggerDict if name.startswith("urllib3.")]
    for name in {*URLLIB3_LOGGERS, *existing}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, WithheldArguments) for f in logger.filters):
            logger.addFilter(WithheldArguments())


withhold_library_arguments()
