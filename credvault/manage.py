"""The one entry of every management command: `manage.py` in a checkout and
`python -m credvault.manage` (deploy/credvault-manage) where credvault is installed. A bad
setting stops every command with one line and exit status 2 (credvault/configuration.py); a
database that cannot be reached, with one line and exit status 1."""

from __future__ import annotations

import os
import sys

# A command that cannot reach its database (DATABASE_URL): the one line, then this status.
UNREACHABLE_DATABASE_EXIT_STATUS = 1


def stop_on_bad_settings() -> None:
    """The settings' checks, each error in one line, before any command runs."""
    from django.core import checks

    from credvault.configuration import CONFIGURATION_EXIT_STATUS
    from services.checks import SETTINGS_TAG

    bad = [issue for issue in checks.run_checks(tags=[SETTINGS_TAG]) if issue.is_serious()]
    for issue in bad:
        print(f"credvault: {' '.join(str(issue).removeprefix('?: ').split())}", file=sys.stderr)
    if bad:
        sys.exit(CONFIGURATION_EXIT_STATUS)


def main(argv: list[str]) -> None:
    """Run the management command of `argv` (`argv[0]` names the program in its errors)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "credvault.settings")
    import django
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import InterfaceError, OperationalError

    try:
        django.setup()
    except ImproperlyConfigured:
        pass  # an empty SECRET_KEY: the command's checks report it (credvault.E001)
    else:
        stop_on_bad_settings()
    try:
        execute_from_command_line(argv)
    except (OperationalError, InterfaceError) as exc:
        # psycopg's and sqlite3's messages name the host and port, never the password.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"credvault: cannot reach the database (DATABASE_URL): {reason}", file=sys.stderr)
        sys.exit(UNREACHABLE_DATABASE_EXIT_STATUS)


if __name__ == "__main__":
    main(sys.argv)
