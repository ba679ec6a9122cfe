from django.apps import AppConfig


class ServicesConfig(AppConfig):
    name = "services"
    verbose_name = "Accounts and connected services"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks and the OpenAPI description of the token scheme.
        from providers.http.client import before_waiting
        from services import checks  # noqa: F401
        from services.api import schema  # noqa: F401
        from services.storage import checks as storage_checks  # noqa: F401
        from services.storage.connections import give_back_connections

        # A request that waits on a provider holds no database connection meanwhile.
        before_waiting(give_back_connections)
