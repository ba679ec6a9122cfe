"""A brokered call's event says where the call came from besides the proxy route: `via`
("mcp" for the MCP server's call_api), empty otherwise and then outside the canonical form, so
that no existing event's digest changes.

On SQLite, adding a NOT NULL column with a default rebuilds the events table, which drops the
trigger that moves an account's chain head (migration 0005): it is created again after the new
column, as in migration 0009. PostgreSQL needs none.
"""

from django.db import migrations, models

from services.storage.schema import create_audit_trigger, drop_audit_trigger


def recreate_audit_trigger(apps, schema_editor) -> None:
    drop_audit_trigger(apps, schema_editor)
    create_audit_trigger(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0014_stream_outcomes"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="via",
            field=models.CharField(blank=True, default="", max_length=8),
        ),
        migrations.RunPython(recreate_audit_trigger, recreate_audit_trigger, elidable=False),
    ]
