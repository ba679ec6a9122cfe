"""A brokered call's event is written before its request leaves (outcome `sent`) and completed
once the call has ended: `sent_path`, the path as it was sent to the provider, is part of the
canonical form when set; `completion_mac` signs the completion, which is written in place
outside the canonical form (services/audit.py). Both are empty for every event written before,
so that no existing event's digest changes.

On SQLite, adding a NOT NULL column with a default rebuilds the events table, which drops the
trigger that moves an account's chain head (migration 0005): it is created again after the new
columns, as in migrations 0009 and 0015. PostgreSQL needs none.
"""

from django.db import migrations, models

from services.storage.schema import create_audit_trigger, drop_audit_trigger


def recreate_audit_trigger(apps, schema_editor) -> None:
    drop_audit_trigger(apps, schema_editor)
    create_audit_trigger(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0017_grant_graphql"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="sent_path",
            field=models.CharField(blank=True, default="", max_length=8192),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="completion_mac",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("success", "Success"),
                    ("refused", "Refused"),
                    ("error", "Error"),
                    ("cut", "Cut"),
                    ("abandoned", "Abandoned"),
                    ("sent", "Sent"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(recreate_audit_trigger, recreate_audit_trigger, elidable=False),
    ]
