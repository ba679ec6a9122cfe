"""Grants gain `access`, `methods` and `paths`. New grants default to brokered
access (`proxy`); every grant that exists when this runs is given `read`, the access it had, so
that no agent in service loses its plaintext read silently (docs/agents.md, "Moving grants to brokered
access")."""

import services.models
from django.db import migrations, models


def existing_grants_keep_reading(apps, schema_editor) -> None:
    apps.get_model("services", "Grant").objects.update(access="read")


class Migration(migrations.Migration):

    dependencies = [
        ('services', '0009_audit_proxy_call'),
    ]

    operations = [
        migrations.AddField(
            model_name='grant',
            name='access',
            field=models.CharField(choices=[('proxy', 'proxy: brokered calls only'), ('read', 'read: brokered calls and the plaintext read')], default='proxy', max_length=8),
        ),
        migrations.AddField(
            model_name='grant',
            name='methods',
            field=models.JSONField(default=services.models.every_method, help_text='HTTP methods allowed through.'),
        ),
        migrations.AddField(
            model_name='grant',
            name='paths',
            field=models.JSONField(default=services.models.the_whole_api, help_text='Path prefixes allowed.'),
        ),
        migrations.RunPython(existing_grants_keep_reading, migrations.RunPython.noop),
    ]
