#!/usr/bin/env python
"""Django's command-line utility for credvault. A bad setting stops every command with one line
and exit status 2 (credvault/configuration.py); a database that cannot be reached, with one
line and exit status 1."""

import os
import sys


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


def main() -> None:
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
        execute_from_command_line(sys.argv)
    except (OperationalError, InterfaceError) as exc:
        # psycopg's and sqlite3's messages name the host and port, never the password.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"credvault: cannot reach the database (DATABASE_URL): {reason}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
