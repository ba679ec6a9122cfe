from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0011_oauth"),
    ]

    operations = [
        migrations.AddField(
            model_name="connectedservice",
            name="refresh_paused_until",
            field=models.DateTimeField(blank=True, default=None, null=True),
        ),
        migrations.AddField(
            model_name="connectedservice",
            name="forced_refresh_at",
            field=models.DateTimeField(blank=True, default=None, null=True),
        ),
    ]
