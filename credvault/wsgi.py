"""WSGI entry point for gunicorn: `credvault.wsgi:application`."""

import os

from django.core.wsgi import get_wsgi_application

from providers.catalog import catalog
from services.api.wsgi import RequestBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "credvault.settings")

application = RequestBodyMiddleware(get_wsgi_application())

# The provider catalog (with CREDVAULT_EXTRA_CATALOG) loads before the first request: an invalid
# entry stops the server at start-up with an error naming the entry and the field.
catalog()
