"""The `--expires-in DAYS` option of the commands that issue tokens."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandError

from services.bearer_tokens import MAX_LIFETIME_DAYS


def add_expires_in(parser) -> None:
    parser.add_argument(
        "--expires-in", type=int, metavar="DAYS", help="Expire after this many days."
    )


def lifetime(days: int | None) -> timedelta | None:
    """The lifetime asked for with --expires-in: None for a token that never expires."""
    if days is None:
        return None
    if not 1 <= days <= MAX_LIFETIME_DAYS:
        raise CommandError(
            f"--expires-in takes a whole number of days from 1 to {MAX_LIFETIME_DAYS}"
        )
    return timedelta(days=days)
