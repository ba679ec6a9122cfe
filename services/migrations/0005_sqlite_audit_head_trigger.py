"""SQLite: an event's insert moves its account's chain head in the same statement.

PostgreSQL appends an event in one statement that also moves the head (writes in a WITH
clause). SQLite cannot write in a WITH clause, so it needed a second statement and a
transaction around both; with this trigger the insert alone does both, atomically, and a
read's event is one autocommitted statement. The DDL lives in services/storage/schema.py;
PostgreSQL needs none. The check credvault.E008 fails when a migrated SQLite database lacks
the trigger (a later table rebuild must create it again).
"""

from django.db import migrations

from services.storage.schema import create_audit_trigger, drop_audit_trigger


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0004_fewer_indexes_per_stored_field"),
    ]

    operations = [
        migrations.RunPython(create_audit_trigger, drop_audit_trigger, elidable=False),
    ]
