"""A grant may name the one base of its service it covers (`router`, `host`): existing grants
name none, and so keep covering every base, as before."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('services', '0015_audit_via'),
    ]

    operations = [
        migrations.AddField(
            model_name='grant',
            name='base',
            field=models.CharField(blank=True, default='', help_text='The one base of the service allowed (router, host); empty: every base.', max_length=32),
        ),
    ]
