"""ASGI entry point (the supported deployment is gunicorn with WSGI; see docs/production.md)."""

import os

from django.core.asgi import get_asgi_application

from providers.catalog import catalog

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "credvault.settings")

application = get_asgi_application()

# The provider catalog (with CREDVAULT_EXTRA_CATALOG) loads before the first request: an invalid
# entry stops the server at start-up with an error naming the entry and the field.
catalog()
