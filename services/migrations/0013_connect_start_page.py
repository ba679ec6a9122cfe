from django.db import migrations, models


def forget_connects_in_progress(apps, schema_editor):
    """A connect started before this migration has no start page and no browser bound to it:
    the callback would refuse it. It expires within 10 minutes anyway; the person starts
    again."""
    apps.get_model("services", "OAuthState").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0012_refresh_pause_and_forced_refresh"),
    ]

    operations = [
        migrations.RunPython(forget_connects_in_progress, migrations.RunPython.noop),
        migrations.AddField(
            model_name="oauthstate",
            name="start_digest",
            field=models.CharField(default="", max_length=64, unique=True),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="oauthstate",
            name="browser_digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
