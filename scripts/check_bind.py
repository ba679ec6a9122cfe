"""Fail at once, with one line, when `make run` cannot serve at CREDVAULT_BIND (standard
library only): before anything is migrated or printed, so that no token and no curl line
point at another server that holds the port."""

from __future__ import annotations

import errno
import os
import socket
import sys

DEFAULT_BIND = "127.0.0.1:8000"


def problem(bind: str) -> str | None:
    """Why gunicorn could not listen at `bind` (`HOST:PORT`), or None."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        return (
            f"CREDVAULT_BIND={bind!r} is not HOST:PORT with a port from 1 to 65535 "
            f"(such as {DEFAULT_BIND})"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError as exc:
            reason = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            return (
                f"cannot serve on {bind}: {reason}. Set CREDVAULT_BIND to a free address, "
                f"for example: make run CREDVAULT_BIND={host}:{int(port) + 1}"
            )
    return None


def main() -> int:
    found = problem(os.environ.get("CREDVAULT_BIND") or DEFAULT_BIND)
    if found:
        print(f"credvault: {found}", file=sys.stderr)
        return 2  # a configuration's exit status (credvault/configuration.py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
