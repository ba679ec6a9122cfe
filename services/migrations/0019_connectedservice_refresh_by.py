"""`refresh_by` on a connected service: its set's access token expiry where the set holds a
refresh token, so that `refresh_tokens` finds the sets due in one query and opens none. Filled
here for the sets stored before, each opened once; a set that does not open stays null (it
could not be refreshed either). A new column that may be null: no table is rebuilt."""

from django.db import migrations, models

from providers.identifiers import OAUTH
from services.crypto import DecryptionError
from services.set_expiry import refresh_by_of
from services.sealed import open_set


def fill_refresh_by(apps, schema_editor) -> None:
    alias = schema_editor.connection.alias if schema_editor is not None else "default"
    services = apps.get_model("services", "ConnectedService").objects.using(alias)
    stored_fields = apps.get_model("services", "CredentialField").objects.using(alias)
    rows = list(
        services.filter(key_type=OAUTH).values_list("id", "account_id", "service", "generation")
    )
    for service_id, account_id, service, generation in rows:
        try:
            opened = open_set(
                account_id=account_id,
                service=service,
                generation=generation,
                fields=stored_fields.filter(connected_service_id=service_id),
            )
        except DecryptionError:
            continue
        refresh_by = refresh_by_of(dict(opened))
        if refresh_by is not None:
            services.filter(pk=service_id).update(refresh_by=refresh_by)


class Migration(migrations.Migration):
    dependencies = [
        ("services", "0018_audit_sent_path"),
    ]

    operations = [
        migrations.AddField(
            model_name="connectedservice",
            name="refresh_by",
            field=models.DateTimeField(blank=True, default=None, null=True),
        ),
        migrations.RunPython(fill_refresh_by, migrations.RunPython.noop, elidable=True),
    ]
