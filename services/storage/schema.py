"""What the database needs beyond the models' tables, for migrations to create: on SQLite the
trigger that moves an account's audit head as its event is inserted (`dialects.SQLite`).

A migration that rebuilds the events table on SQLite (Django's schema editor copies a table
into a new one for many changes) drops the trigger with the old table: such a migration must
create it again. The check credvault.E008 (`checks.py`) fails while it is missing.
"""

from __future__ import annotations

from services.storage.dialects import dialect_class


def create_audit_trigger(apps, schema_editor) -> None:
    """Migration 0005's forward step."""
    events = apps.get_model("services", "AuditEvent")._meta.db_table
    accounts = apps.get_model("services", "Account")._meta.db_table
    dialect = dialect_class(schema_editor.connection)
    for statement in dialect.audit_trigger(schema_editor.quote_name, events, accounts):
        schema_editor.execute(statement)


def drop_audit_trigger(apps, schema_editor) -> None:
    """Migration 0005's backward step."""
    dialect = dialect_class(schema_editor.connection)
    for statement in dialect.drop_audit_trigger(schema_editor.quote_name):
        schema_editor.execute(statement)
