from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Provider catalog"

    def ready(self) -> None:
        # Load and validate the catalog now, so that a bad entry stops start-up with an error
        # naming the entry and the field, never the first request.
        from providers.catalog import catalog

        catalog()
