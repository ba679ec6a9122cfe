"""The `--expires-in DAYS` option of the commands that issue tokens."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandError


def add_expires_in(parser) -> None:
    parser.add_argument(
        "--expires-in", type=int, metavar="DAYS", help="Expire after this many days."
    )


def expiry(days: int | None) -> timedelta | None:
    """The lifetime asked for with --expires-in: None for a token that never expires."""
    if days is None:
        return None
    if days < 1:
        raise CommandError("--expires-in takes a whole number of days, 1 or more")
    return timedelta(days=days)
