"""Django's `migrate`, with the errors of credvault's commands: a failing system check (the
start-up self-check of a key manager that refuses, say) is one line, a bad argument too
(services/management/base.py). `make run` and the systemd unit run it before gunicorn."""

from django.core.management.commands import migrate

from services.management.base import CredvaultCommand


class Command(CredvaultCommand, migrate.Command):
    pass
