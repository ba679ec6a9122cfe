"""Start-up checks of the database: a SQLite too old for the audit append (credvault.E007), and
an audit-head trigger gone from a migrated SQLite database (credvault.E008, a database check:
`manage.py migrate` and `manage.py check --database default` run it)."""

from __future__ import annotations

from django.core.checks import Error, Tags, register
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.recorder import MigrationRecorder

from services.storage.dialects import dialect_class, dialect_for

# The migration that creates the trigger; before it runs there is nothing to miss.
TRIGGER_MIGRATION = ("services", "0005_sqlite_audit_head_trigger")


@register()
def check_database_version(app_configs, **kwargs):
    problem = dialect_class(connections[DEFAULT_DB_ALIAS]).version_problem()
    return [Error(problem, id="credvault.E007")] if problem else []


@register(Tags.database)
def check_audit_trigger(app_configs, databases=None, **kwargs):
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    db = connections[DEFAULT_DB_ALIAS]
    if TRIGGER_MIGRATION not in MigrationRecorder(db).applied_migrations():
        return []
    with db.cursor() as cursor:
        missing = dialect_for(db).audit_trigger_missing(cursor)
    if not missing:
        return []
    return [
        Error(
            "The SQLite trigger that moves each account's audit head is missing: every audit "
            "append would leave the head behind and break the chain.",
            hint="A migration that rebuilt the audit events table dropped it; create it again "
            "in that migration with services.storage.schema.create_audit_trigger.",
            id="credvault.E008",
        )
    ]
