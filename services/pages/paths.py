"""Where the people's pages live: the prefixes under which sessions, the signed-in user and
CSRF serve a request (services/api/middleware.py skips them on every other path)."""

from __future__ import annotations

ACCOUNT_PREFIX = "/account/"
# The approval page (`/approvals/{id}`) needs the signed-in member too.
APPROVALS_PREFIX = "/approvals/"
PAGE_PREFIXES = (ACCOUNT_PREFIX, APPROVALS_PREFIX)


def is_page_path(path: str) -> bool:
    return path.startswith(PAGE_PREFIXES)
