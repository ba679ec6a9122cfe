"""The base of credvault's management commands: an operator's mistake is answered with one line
on standard error and a non-zero exit, never a traceback or a page of usage.

- A bad argument (a missing one, an unknown option, a value its `type` refuses) is one line,
  `manage.py COMMAND: error: ...`, and exit status 2. A `type=` function refuses a value by
  raising `argparse.ArgumentTypeError`: a CommandError raised there escapes argparse and
  Django as a traceback.
- A failing system check (a bad key setting, an invalid CREDVAULT_EXTRA_CATALOG) is one line
  naming each error's id, message and hint, and exit status 1; `manage.py check` prints the
  full report.
- What a command refuses itself is a CommandError with a one-line message, which Django
  prints as `CommandError: ...` with exit status 1.

Errors and hints name the command as the operator runs it (`manage_command`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

from django.core import checks
from django.core.management.base import BaseCommand, CommandParser, SystemCheckError

# A checkout holds manage.py beside the packages; an installed wheel does not.
CHECKOUT = (Path(__file__).resolve().parents[2] / "manage.py").is_file()
INSTALLED_COMMAND = "credvault-manage"


def manage_command() -> str:
    """How an operator runs a management command here, for the errors and hints that name one:
    `python manage.py` in a checkout, else `credvault-manage`, the production wrapper (it runs
    `python -m credvault.manage`, whose name the operator never typed)."""
    return "python manage.py" if CHECKOUT else INSTALLED_COMMAND


def one_line(text: str) -> str:
    return " ".join(text.split())


class OneLineParser(CommandParser):
    """Django's parser, whose errors on the command line are one line (the usage is what
    `--help` is for). Called from code (`call_command`), an error is a CommandError, as in
    Django."""

    def error(self, message: str) -> NoReturn:
        if not self.called_from_command_line:
            super().error(message)
        self.exit(2, f"{self.prog}: error: {one_line(message)} (--help shows the usage)\n")


class CredvaultCommand(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # Installed, the program is django-admin or credvault/manage.py (credvault-manage's).
        if not CHECKOUT and os.path.basename(prog_name) in ("django-admin", "manage.py"):
            prog_name = INSTALLED_COMMAND
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # Django builds a CommandParser itself, with its own options; the subclass only changes
        # how an error is printed.
        parser.__class__ = OneLineParser
        return parser

    def check(
        self,
        app_configs: Any = None,
        tags: Any = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Any = None,
    ) -> None:
        try:
            super().check(
                app_configs=app_configs,
                tags=tags,
                display_num_errors=display_num_errors,
                include_deployment_checks=include_deployment_checks,
                fail_level=fail_level,
                databases=databases,
            )
        except SystemCheckError:
            # Django's report spans a page; the errors themselves fit on one line, in the form
            # `check` prints them. Only a failed check runs the checks a second time, to have
            # them as objects.
            issues = checks.run_checks(
                app_configs=app_configs,
                tags=tags,
                include_deployment_checks=include_deployment_checks,
                databases=databases,
            )
            serious = [
                # `check`'s form, without the `?: ` of an error that names no object.
                one_line(str(issue)).removeprefix("?: ")
                for issue in issues
                if issue.is_serious(fail_level) and not issue.is_silenced()
            ]
            if not serious:
                raise
            raise SystemCheckError(f"SystemCheckError: {' '.join(serious)}") from None
