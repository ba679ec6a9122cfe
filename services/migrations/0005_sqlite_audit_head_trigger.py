"""SQLite: an event's insert moves its account's chain head in the same statement.

PostgreSQL appends an event in one statement that also moves the head (writes in a WITH
clause, services/sql.py). SQLite cannot write in a WITH clause, so it needed a second
statement and a transaction around both; with this trigger the insert alone does both,
atomically, and a read's event is one autocommitted statement (measured: BENCHMARKS.md).

A migration that rebuilds the events table on SQLite (Django's schema editor copies a table
into a new one for many changes) drops the trigger with the old table: such a migration must
create it again. `tests/test_sqlite_backend.py` and the audit tests fail without it.
"""

from django.db import migrations

TRIGGER = "services_auditevent_moves_head"


def create_trigger(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    quote = schema_editor.quote_name
    events = quote(apps.get_model("services", "AuditEvent")._meta.db_table)
    accounts = quote(apps.get_model("services", "Account")._meta.db_table)
    schema_editor.execute(
        f"CREATE TRIGGER {quote(TRIGGER)} AFTER INSERT ON {events} BEGIN "
        f"UPDATE {accounts} SET audit_seq = NEW.seq, audit_head = NEW.digest "
        "WHERE id = NEW.account_id; END"
    )


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {schema_editor.quote_name(TRIGGER)}")


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0004_fewer_indexes_per_stored_field"),
    ]

    operations = [
        migrations.RunPython(create_trigger, drop_trigger, elidable=False),
    ]
