from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Provider catalog"

    def ready(self) -> None:
        # A bad catalog entry stops start-up with an error naming the entry and the field, never
        # the first request: every management command through the system check credvault.E017
        # (one line, not the traceback an error raised here would print), the server by
        # loading the catalog before it serves (credvault/wsgi.py).
        from providers import checks  # noqa: F401
