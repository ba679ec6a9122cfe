"""A brokered call's event (agent.proxy) holds its method, path and the provider's status.

On SQLite, adding a NOT NULL column with a default makes Django rebuild the events table,
which drops the trigger that moves an account's chain head (migration 0005): it is created
again after the new columns (services/storage/schema.py). PostgreSQL needs none.
"""

from django.db import migrations, models

from services.storage.schema import create_audit_trigger, drop_audit_trigger


def recreate_audit_trigger(apps, schema_editor) -> None:
    drop_audit_trigger(apps, schema_editor)
    create_audit_trigger(apps, schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('services', '0008_audit_checkpoints'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='method',
            field=models.CharField(blank=True, default='', max_length=7),
        ),
        migrations.AddField(
            model_name='auditevent',
            name='path',
            field=models.CharField(blank=True, default='', max_length=2048),
        ),
        migrations.AddField(
            model_name='auditevent',
            name='upstream_status',
            field=models.PositiveSmallIntegerField(blank=True, default=None, null=True),
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='action',
            field=models.CharField(choices=[('services.list', 'services.list'), ('services.test', 'services.test'), ('services.store', 'services.store'), ('services.remove', 'services.remove'), ('providers.list', 'providers.list'), ('agents.list', 'agents.list'), ('agents.put', 'agents.put'), ('agents.delete', 'agents.delete'), ('agents.issue_token', 'agents.issue_token'), ('agents.list_tokens', 'agents.list_tokens'), ('agents.revoke_token', 'agents.revoke_token'), ('audit.list', 'audit.list'), ('agent.read_credentials', 'agent.read_credentials'), ('agent.proxy', 'agent.proxy'), ('tokens.issue', 'tokens.issue'), ('tokens.revoke', 'tokens.revoke'), ('tokens.expire', 'tokens.expire'), ('accounts.deactivate', 'accounts.deactivate'), ('accounts.reactivate', 'accounts.reactivate'), ('keys.reencrypt', 'keys.reencrypt')], max_length=32),
        ),
        migrations.RunPython(recreate_audit_trigger, recreate_audit_trigger, elidable=False),
    ]
